"""练习 003 · 请求的长度记账（第 1 章 核心数据结构）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


class ReqState:
    """一个请求的长度记账：mini-sglang 里 Req 的那几个整数。

    属性：
        input_ids:      到目前为止的全部 token（list[int]，自己的一份拷贝）
        cached_len:     前多少个 token 的 KV 已经在缓存里
        device_len:     设备上应该有的 token 数（一开始 = len(input_ids)）
        max_device_len: len(input_ids) + output_len
    """

    def __init__(self, input_ids: list[int], cached_len: int, output_len: int) -> None:
        """检查参数（不合法抛 ValueError），然后设置上面四个属性。

        合法的参数：0 <= cached_len < len(input_ids)，output_len >= 1。
        """
        raise NotImplementedError

    @property
    def extend_len(self) -> int:
        """这一步要送进模型的 token 数：device_len - cached_len。"""
        raise NotImplementedError

    @property
    def remain_len(self) -> int:
        """还能生成多少个 token：max_device_len - device_len。"""
        raise NotImplementedError

    @property
    def can_decode(self) -> bool:
        """还能不能再生成一个 token。"""
        raise NotImplementedError

    def complete_one(self) -> None:
        """一步前向结束：cached_len 追上 device_len，device_len 加 1。

        已经不能再 decode（已生成 output_len 个）时抛 RuntimeError。
        """
        raise NotImplementedError

    def append(self, token: int) -> None:
        """把新采样出的 token 追加到 input_ids 末尾。

        len(input_ids) 已经等于 device_len（还没 complete_one）时抛 RuntimeError。
        """
        raise NotImplementedError
