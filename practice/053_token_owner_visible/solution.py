"""练习 053 · 每个 query token 属于谁、看得见几个 key：整批一次算（第 17 章 更快的注意力后端）

参考答案。
"""

from __future__ import annotations

import torch


def token_owner_and_visible(qo_indptr: torch.Tensor, seq_lens_k: torch.Tensor,
                            num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """→ (owner [num_tokens], visible [num_tokens])，都是 int64。整批用张量运算，不循环、不取回 Python。

    形状不对（不是一维、len(qo_indptr) != len(seq_lens_k) + 1）或 num_tokens < 0 时抛 ValueError。
    """
    if qo_indptr.dim() != 1 or seq_lens_k.dim() != 1 or qo_indptr.shape[0] != seq_lens_k.shape[0] + 1:
        raise ValueError(f"形状对不上：qo_indptr {tuple(qo_indptr.shape)}，seq_lens_k {tuple(seq_lens_k.shape)}")
    if num_tokens < 0:
        raise ValueError(f"num_tokens 不能是负数：{num_tokens}")
    indptr = qo_indptr.long()
    t = torch.arange(num_tokens, device=qo_indptr.device)
    owner = torch.searchsorted(indptr, t, right=True) - 1  # 最后一个起点 <= t 的请求
    later = indptr[owner + 1] - 1 - t  # 同一请求里排在它后面的 query 数
    return owner, seq_lens_k.long()[owner] - later
