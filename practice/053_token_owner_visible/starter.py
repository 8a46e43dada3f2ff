"""练习 053 · 每个 query token 属于谁、看得见几个 key：整批一次算（第 17 章 更快的注意力后端）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def token_owner_and_visible(qo_indptr: torch.Tensor, seq_lens_k: torch.Tensor,
                            num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """→ (owner [num_tokens], visible [num_tokens])，都是 int64。整批用张量运算，不循环、不取回 Python。

    形状不对（不是一维、len(qo_indptr) != len(seq_lens_k) + 1）或 num_tokens < 0 时抛 ValueError。
    """
    raise NotImplementedError
