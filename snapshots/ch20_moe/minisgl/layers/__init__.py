"""模型的积木：每个层都是 BaseOP，线性层和词表层一开始就写成张量并行的形态。"""

from .activation import silu_and_mul
from .attention import AttentionLayer
from .base import BaseOP, OPList
from .embedding import ParallelLMHead, VocabParallelEmbedding
from .linear import (
    LinearColParallelMerged,
    LinearOProj,
    LinearQKVMerged,
    LinearReplicated,
    LinearRowParallel,
)
from .moe import MoELayer
from .norm import RMSNorm, RMSNormFused
from .rotary import RotaryEmbedding, get_rope, rope_tables_to

__all__ = [
    "AttentionLayer",
    "BaseOP",
    "LinearColParallelMerged",
    "LinearOProj",
    "LinearQKVMerged",
    "LinearReplicated",
    "LinearRowParallel",
    "MoELayer",
    "OPList",
    "ParallelLMHead",
    "RMSNorm",
    "RMSNormFused",
    "RotaryEmbedding",
    "VocabParallelEmbedding",
    "get_rope",
    "rope_tables_to",
    "silu_and_mul",
]
