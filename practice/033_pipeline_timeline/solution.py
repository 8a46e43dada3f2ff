"""练习 033 的参考答案。"""

from __future__ import annotations


def pipeline_time(prepare: list[int], forward: list[int], process: list[int]) -> tuple[int, int]:
    if not len(prepare) == len(forward) == len(process):
        raise ValueError("prepare、forward、process 的长度必须相同")
    if any(t < 0 for t in (*prepare, *forward, *process)):
        raise ValueError("时间不能是负数")
    normal = sum(prepare) + sum(forward) + sum(process)
    cpu = device_free = 0
    done: list[int] = []  # 每一批前向做完的时刻
    for i in range(len(prepare)):
        cpu += prepare[i]  # 准备第 i 批
        start = max(cpu, device_free)  # 发出：设备空了才开始
        device_free = start + forward[i]
        done.append(device_free)
        if i > 0:  # 处理上一批：先等它做完
            cpu = max(cpu, done[i - 1]) + process[i - 1]
    if done:  # 最后一批
        cpu = max(cpu, done[-1]) + process[-1]
    return normal, cpu
