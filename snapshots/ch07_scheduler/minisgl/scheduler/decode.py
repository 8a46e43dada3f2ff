"""DecodeManager：正在 decode 的请求，按接纳的先后顺序排好。"""

from __future__ import annotations

from typing import Iterable

from minisgl.core import Batch, Req
from minisgl.utils import div_ceil


class DecodeManager:
    def __init__(self) -> None:
        # uid → Req。dict 记得插入顺序，批里的请求顺序因此是确定的：
        # 多个 TP rank 各自拼批时，同样的历史得到同样的顺序（上游用 set，顺序随对象地址变）
        self.running: dict[int, Req] = {}

    def filter_reqs(self, reqs: Iterable[Req]) -> None:
        """刚发出前向的请求里还能再 decode 的加进来；已经到头的去掉。"""
        for req in reqs:
            if req.can_decode:
                self.running.setdefault(req.uid, req)
        self.running = {uid: req for uid, req in self.running.items() if req.can_decode}

    def remove_req(self, req: Req) -> None:
        self.running.pop(req.uid, None)

    def abort_req(self, uid: int) -> Req | None:
        return self.running.pop(uid, None)

    def inflight_pages(self, page_size: int) -> int:
        """正在跑的请求最坏情况下还要几页：每个都按生成到 max_tokens 个 token 算。

        最后采样出的那个 token 不进 KV 池，所以一个请求最多占 max_device_len - 1 个槽位；
        [0, cached_len) 的页已经分到了。
        """
        return sum(div_ceil(req.max_device_len - 1, page_size) - div_ceil(req.cached_len, page_size)
                   for req in self.running.values())

    @property
    def runnable(self) -> bool:
        return bool(self.running)

    def schedule_next_batch(self) -> Batch | None:
        if not self.running:
            return None
        return Batch(list(self.running.values()), "decode")
