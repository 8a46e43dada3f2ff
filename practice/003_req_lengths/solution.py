"""练习 003 · 请求的长度记账 —— 参考答案。"""

from __future__ import annotations


class ReqState:
    """一个请求的长度记账：mini-sglang 里 Req 的那几个整数。"""

    def __init__(self, input_ids: list[int], cached_len: int, output_len: int) -> None:
        if not (0 <= cached_len < len(input_ids)):
            raise ValueError(
                f"cached_len 必须满足 0 <= cached_len < len(input_ids)，"
                f"现在 cached_len={cached_len}，len(input_ids)={len(input_ids)}"
            )
        if output_len < 1:
            raise ValueError(f"output_len 至少是 1：{output_len}")
        self.input_ids = list(input_ids)  # 自己的拷贝，append 不会改到调用者的列表
        self.cached_len = cached_len
        self.device_len = len(self.input_ids)
        self.max_device_len = len(self.input_ids) + output_len

    @property
    def extend_len(self) -> int:
        return self.device_len - self.cached_len

    @property
    def remain_len(self) -> int:
        return self.max_device_len - self.device_len

    @property
    def can_decode(self) -> bool:
        return self.remain_len > 0

    def complete_one(self) -> None:
        if not self.can_decode:
            raise RuntimeError(f"{self!r} 已经生成了 output_len 个 token，不能再前进一步")
        self.cached_len = self.device_len  # 这一步送进去的 token 的 KV 都进了缓存
        self.device_len += 1  # 新采样出的 token

    def append(self, token: int) -> None:
        if len(self.input_ids) >= self.device_len:
            raise RuntimeError(
                f"{self!r} 已有 {len(self.input_ids)} 个 token：append 要跟在 complete_one 之后"
            )
        self.input_ids.append(token)

    def __repr__(self) -> str:
        return (
            f"ReqState(cached_len={self.cached_len}, device_len={self.device_len}, "
            f"max_device_len={self.max_device_len})"
        )
