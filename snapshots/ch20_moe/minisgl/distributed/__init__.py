"""张量并行的"位置"（info：第几个 rank、一共几个）和"通信"（impl：all_reduce、all_gather）。

层在建立时按位置切权重，前向时在需要的地方通信；单卡时位置是 (0, 1)，层根本不调用通信。
"""

from .impl import DistributedCommunicator, DistributedImpl, TorchDistributedImpl, destroy_distributed
from .info import (
    DistributedInfo,
    get_ep_info,
    get_tp_info,
    local_kv_heads,
    set_expert_parallel,
    set_tp_info,
)

__all__ = [
    "DistributedCommunicator",
    "DistributedImpl",
    "DistributedInfo",
    "TorchDistributedImpl",
    "destroy_distributed",
    "get_ep_info",
    "get_tp_info",
    "local_kv_heads",
    "set_expert_parallel",
    "set_tp_info",
]
