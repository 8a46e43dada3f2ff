"""练习 022 · 静态批处理与连续批处理：一步一步排出来（第 7 章 调度器骨架与离线接口）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def simulate(
    requests: list[tuple[int, int]], max_running: int, continuous: bool
) -> list[tuple[str, list[int]]]:
    """排出每一步的批：返回 [(阶段, 这一批的 uid 列表), ...]，阶段是 "prefill" 或 "decode"。

    requests 是按到达顺序排的 (uid, max_tokens)。prefill 优先：能接纳新请求（有空位、队列不空，
    静态批处理还要求一个请求都没在跑）就从队首接纳、只做 prefill；否则全部在跑的请求按接纳的
    先后各 decode 一个 token。生成到 max_tokens 个就离开。参数不对时抛 ValueError。
    """
    raise NotImplementedError
