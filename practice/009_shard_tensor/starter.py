"""练习 009 · 按权重名切分：shard_tensor（第 3 章 模型与权重加载）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def shard_tensor(
    key: str, value: torch.Tensor, rank: int, size: int, num_kv_heads: int
) -> torch.Tensor:
    """按权重名（倒数第二段是模块名）切出第 rank 个 rank 该存的那一块。

    q_proj / gate_proj / up_proj：第 0 维均分；k_proj / v_proj：第 0 维按 KV 头分，头比 rank 少时
    rank r 拿第 r // (size // num_kv_heads) 个头；o_proj / down_proj：第 1 维均分；
    embed_tokens / lm_head：每个 rank div_ceil(vocab, size) 行，超出词表的补零行；其他原样返回。
    返回 dtype 不变的连续张量。分不了、参数不合法时抛 ValueError。
    """
    raise NotImplementedError
