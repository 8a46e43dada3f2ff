"""minisgl 各处共用的小工具。其他模块一律写 ``from minisgl.utils import ...``。"""

from .logger import RankLogger, get_log_rank, init_logger, set_log_rank
from .math import align_ceil, align_down, div_ceil, div_even
from .misc import device_of, is_cuda, parse_dtype, torch_dtype

__all__ = [
    "RankLogger",
    "init_logger",
    "set_log_rank",
    "get_log_rank",
    "div_even",
    "div_ceil",
    "align_ceil",
    "align_down",
    "is_cuda",
    "device_of",
    "parse_dtype",
    "torch_dtype",
]
