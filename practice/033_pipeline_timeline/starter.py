"""练习 033 · 两段流水线：依次执行是和，重叠是最大值（第 11 章 重叠调度）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def pipeline_time(prepare: list[int], forward: list[int], process: list[int]) -> tuple[int, int]:
    """每步三段：CPU 准备 / 设备前向 / CPU 处理结果。返回 (不重叠的总时间, 重叠的总时间)。

    重叠时：准备第 i 批 → 发出它的前向（设备空了才开始）→ 等第 i - 1 批做完、处理它的结果；
    全部发出之后等最后一批做完、处理它。三个列表不等长或有负数时抛 ValueError。
    """
    raise NotImplementedError
