"""张量并行的"位置"（info）和"通信"（impl）。第 16 章详细讲；第 2 章的层已经要用到它们。"""

from .impl import DistributedCommunicator, DistributedImpl, TorchDistributedImpl, destroy_distributed
from .info import DistributedInfo, get_tp_info, local_kv_heads, set_tp_info

__all__ = [
    "DistributedCommunicator",
    "DistributedImpl",
    "DistributedInfo",
    "TorchDistributedImpl",
    "destroy_distributed",
    "get_tp_info",
    "local_kv_heads",
    "set_tp_info",
]
