"""练习 010 · 流式加载里的 q/k/v 与 gate/up 合并（第 3 章 模型与权重加载）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def merge_stream(items: Iterable[tuple[str, list]]) -> Iterator[tuple[str, list]]:
    """流式地把 q/k/v 合并成 qkv_proj、gate/up 合并成 gate_up_proj，其他权重原样交出。

    items 按任意顺序给出 (name, value)，value 是代表张量各行的 list。这是一个生成器（函数体里用 yield）：
    普通权重读到就交出；同一前缀、同一参数名（weight / bias）的 q、k、v 凑齐后立刻交出
    (前缀.qkv_proj.参数名, q + k + v)，并从缓冲里删掉；gate、up 同理。
    输入读完还有没凑齐的组时抛 ValueError，消息里写出每个缺少的分块的完整名字。
    """
    raise NotImplementedError
