# 作弊：凑齐的组不从缓冲里删掉
# 为什么必须判错：它绕过了这道题的要点（凑齐的组不从缓冲里删掉），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def merge_stream(items):
    done = {}
    pending = {}
    for name, value in items:
        parts = name.split(".")
        module, param = (parts[-2] if len(parts) >= 2 else ""), parts[-1]
        merged = PIECE_TO_GROUP.get(module)
        if merged is None or param not in ("weight", "bias"):
            yield name, value
            continue
        prefix = ".".join(parts[:-2])
        group = pending.setdefault((prefix, merged, param), {})
        group[module] = value
        if len(group) == len(GROUPS[merged]):
            done[(prefix, merged, param)] = group  # 留着不删
            out = []
            for piece in GROUPS[merged]:
                out.extend(group[piece])
            yield _full_name(prefix, merged, param), out
    missing = [_full_name(p, piece, param) for (p, merged, param), g in pending.items()
               if (p, merged, param) not in done for piece in GROUPS[merged] if piece not in g]
    if missing:
        raise ValueError("缺少：" + "、".join(missing))
