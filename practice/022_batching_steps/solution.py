"""练习 022 · 静态批处理与连续批处理：一步一步排出来 —— 参考答案。"""

from __future__ import annotations


def simulate(
    requests: list[tuple[int, int]], max_running: int, continuous: bool
) -> list[tuple[str, list[int]]]:
    if max_running < 1:
        raise ValueError(f"max_running 至少是 1：{max_running}")
    limit: dict[int, int] = {}
    for uid, max_tokens in requests:
        if uid in limit:
            raise ValueError(f"uid {uid} 出现了不止一次")
        if max_tokens < 1:
            raise ValueError(f"请求 {uid} 的 max_tokens 至少是 1：{max_tokens}")
        limit[uid] = max_tokens

    queue = [uid for uid, _ in requests]  # 队首在前：先来先服务
    running: list[int] = []  # 按接纳的先后
    produced = dict.fromkeys(limit, 0)
    steps: list[tuple[str, list[int]]] = []
    while queue or running:
        free = max_running - len(running)
        if queue and free > 0 and (continuous or not running):
            batch, queue = queue[:free], queue[free:]
            running += batch
            steps.append(("prefill", batch))
        else:
            batch = list(running)
            steps.append(("decode", batch))
        for uid in batch:
            produced[uid] += 1
        running = [uid for uid in running if produced[uid] < limit[uid]]
    return steps
