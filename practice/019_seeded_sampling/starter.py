"""练习 019 · 按请求采样：温度、贪心行与固定种子（第 6 章 Engine 与采样器）

把 `sample` 里的 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch

# ---------------------------------------------------------------------------
# 已经写好的 top-k / top-p 过滤（第 18 题的参考答案），直接用，不用改
# ---------------------------------------------------------------------------


def _check_arguments(
    logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
) -> None:
    if logits.dim() != 2:
        raise ValueError(
            f"logits 应该是 [B, V] 的二维张量，现在的形状是 {tuple(logits.shape)}"
        )
    B = logits.shape[0]
    if tuple(top_k.shape) != (B,) or tuple(top_p.shape) != (B,):
        raise ValueError(
            f"top_k、top_p 应该是长度 {B} 的一维张量，现在是 {tuple(top_k.shape)} 和 {tuple(top_p.shape)}"
        )
    if bool(((top_k == 0) | (top_k < -1)).any()):
        raise ValueError(f"top_k 只能是 -1（不限制）或 >= 1：{top_k.tolist()}")
    if not bool(((top_p > 0) & (top_p <= 1)).all()):  # nan 也过不了这一关
        raise ValueError(f"top_p 必须在 (0, 1] 里：{top_p.tolist()}")


def top_k_top_p_filter(
    logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
) -> torch.Tensor:
    _check_arguments(logits, top_k, top_p)
    B, V = logits.shape
    # 稳定的降序排序：logit 一样时，id 小的排在前面——并列的处理就这样定下来了
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    rank = torch.arange(V, device=logits.device).expand(B, V)

    # top-k：只留排名 < k 的；k = -1 或 k >= V 表示不限制
    k = torch.where((top_k < 0) | (top_k >= V), V, top_k).to(rank.dtype)
    keep = rank < k[:, None]

    # top-p：在 top-k 剩下的 token 上重新归一化，排在它前面的概率之和 < p 才留下
    probs = torch.softmax(
        sorted_logits.masked_fill(~keep, float("-inf")).double(), dim=-1
    )
    ahead = (
        torch.cumsum(probs, dim=-1) - probs
    )  # 前面（不含自己）的概率之和；第一名恰好是 0
    ahead[:, 0] = 0.0
    p = top_p.double()[:, None]
    keep &= (p >= 1) | (ahead < p)  # p = 1 表示不限制（浮点误差不会误删最后几个）

    # 从“排序后的位置”散回原来的 token id
    keep_by_id = torch.zeros_like(keep).scatter(1, order, keep)
    return logits.masked_fill(~keep_by_id, float("-inf"))


# ---------------------------------------------------------------------------
# 你要写的：采样
# ---------------------------------------------------------------------------


def sample(
    logits: torch.Tensor,
    temperatures: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """按请求采样，返回 [B] 的 int64 token id。

    温度为 0 或 top_k 为 1 的行：直接取 argmax（并列取 id 最小的）。
    其他行：logits 除以温度 → top_k_top_p_filter → softmax → torch.multinomial(..., generator=generator)。
    同一个种子的 generator 必须得到同样的结果。温度 < 0（或 nan）、形状不对时抛 ValueError。
    """
    raise NotImplementedError
