"""本进程在张量并行（TP）里的位置：第几个 rank、一共几个；以及 MoE 的专家怎么分（专家并行，EP）。

每个 TP rank 是一个独立的进程，进程启动时登记一次，之后建层、切权重、
建 KV 池都从这里读，不必层层传参。从来没登记过时当作单卡：DistributedInfo(0, 1)。
专家并行用的是同一组 rank：开着时每个 rank 放 E / size 个完整的专家，关着时每个专家按 TP 切。
"""

from __future__ import annotations

from dataclasses import dataclass

from minisgl.utils import div_even


@dataclass(frozen=True)
class DistributedInfo:
    """TP 里的位置：rank 从 0 数起，size 是 rank 总数。"""

    rank: int
    size: int

    def __post_init__(self) -> None:
        if not (isinstance(self.size, int) and self.size >= 1):
            raise ValueError(f"TP 的 size 必须是 ≥ 1 的整数，收到 {self.size!r}")
        if not (isinstance(self.rank, int) and 0 <= self.rank < self.size):
            raise ValueError(f"TP 的 rank 必须在 [0, {self.size}) 里，收到 {self.rank!r}")

    def is_primary(self) -> bool:
        """rank 0 负责和外界打交道（打印日志、把结果发回前端）。"""
        return self.rank == 0


_TP_INFO: DistributedInfo | None = None


def set_tp_info(rank: int, size: int) -> DistributedInfo:
    """登记本进程的 TP 位置并返回它。单进程模拟多个 rank 时，可以换着登记。"""
    global _TP_INFO
    _TP_INFO = DistributedInfo(rank, size)
    return _TP_INFO


def get_tp_info() -> DistributedInfo:
    """本进程的 TP 位置；没登记过就是单卡 DistributedInfo(0, 1)。"""
    return _TP_INFO if _TP_INFO is not None else DistributedInfo(0, 1)


_EXPERT_PARALLEL = False


def set_expert_parallel(enabled: bool) -> None:
    """登记 MoE 层的专家是按 rank 分（True，EP）还是每个专家按 TP 切（False，默认）。"""
    global _EXPERT_PARALLEL
    _EXPERT_PARALLEL = enabled


def get_ep_info() -> DistributedInfo:
    """专家并行里的位置：开着时就是 TP 的位置（同一组 rank），关着时是 (0, 1)——专家不分，每个 rank 都有全部专家。"""
    return get_tp_info() if _EXPERT_PARALLEL else DistributedInfo(0, 1)


def local_kv_heads(num_kv_heads: int, tp_size: int | None = None) -> int:
    """每个 rank 放几个 KV 头：能整除就平分；KV 头比 rank 少时每个 rank 放 1 个（复制）。

    层、权重切分、KV 池都按这个数来，所以全书只在这里写一次。tp_size 不给时用本进程登记的。
    """
    size = get_tp_info().size if tp_size is None else tp_size
    return div_even(num_kv_heads, size, allow_replicate=True)
