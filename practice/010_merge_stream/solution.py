"""练习 010 · 流式加载里的 q/k/v 与 gate/up 合并 —— 参考答案。"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

# 合并后的模块名 -> 按顺序要拼起来的几块
GROUPS = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}
PIECE_TO_GROUP = {piece: merged for merged, pieces in GROUPS.items() for piece in pieces}


def _full_name(prefix: str, module: str, param: str) -> str:
    return f"{prefix}.{module}.{param}" if prefix else f"{module}.{param}"


def merge_stream(items: Iterable[tuple[str, list]]) -> Iterator[tuple[str, list]]:
    # (前缀, 合并后的模块名, weight/bias) -> {分块的模块名: 值}；只放还没凑齐的组
    pending: dict[tuple[str, str, str], dict[str, list]] = {}
    for name, value in items:
        parts = name.split(".")
        module = parts[-2] if len(parts) >= 2 else ""
        param = parts[-1]
        merged = PIECE_TO_GROUP.get(module)
        if merged is None or param not in ("weight", "bias"):
            yield name, value  # 普通权重：立刻交出去，不缓冲
            continue
        prefix = ".".join(parts[:-2])
        key = (prefix, merged, param)
        group = pending.setdefault(key, {})
        group[module] = value
        if len(group) == len(GROUPS[merged]):
            del pending[key]  # 凑齐了：马上从缓冲里拿掉，交出去之后就不再引用它们
            out: list = []
            for piece in GROUPS[merged]:  # 按 q, k, v（gate, up）的顺序拼，和到达顺序无关
                out.extend(group[piece])
            yield _full_name(prefix, merged, param), out
    if pending:
        missing = [
            _full_name(prefix, piece, param)
            for (prefix, merged, param), group in pending.items()
            for piece in GROUPS[merged]
            if piece not in group
        ]
        raise ValueError("权重不完整，这些分块没有出现：" + "、".join(missing))
