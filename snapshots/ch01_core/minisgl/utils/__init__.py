"""minisgl 各处共用的小工具。其他模块一律写 ``from minisgl.utils import ...``。"""

from .logger import RankLogger, init_logger, set_log_rank
from .math import align_ceil, div_ceil, div_even
from .misc import device_of, is_cuda, to_device, torch_dtype
from .registry import Registry

__all__ = [
    "RankLogger",
    "init_logger",
    "set_log_rank",
    "div_even",
    "div_ceil",
    "align_ceil",
    "is_cuda",
    "device_of",
    "to_device",
    "torch_dtype",
    "Registry",
]
