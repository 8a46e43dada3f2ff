# 作弊：凑齐的组不从缓冲里删掉
# 为什么必须判错：题目要求一组凑齐、交出后立刻从缓冲里删掉；它把拼完的组留在 done 里，已经交出的 q/k/v、gate/up 一直被攥着，测试用弱引用数还活着的已交出值，远超允许的几个。
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
