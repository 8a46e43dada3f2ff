"""练习 016 · 带缓存前缀的分页注意力（prefill）（第 5 章 注意力后端）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def paged_prefill_attention(
    q: torch.Tensor,
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    page_table: torch.Tensor,
    table_idx: list[int],
    cached_lens: list[int],
    extend_lens: list[int],
) -> torch.Tensor:
    """一个变长 prefill 批的注意力，每个请求可以带缓存前缀。

    q: [T, Hq, D]，全部新 token 的 query 按请求顺序拼接，T = sum(extend_lens)；
    k_buf, v_buf: [num_slots, Hkv, D]，每个请求位置 0 … cached_len + extend_len - 1 的 K/V 都已写入；
    page_table: [num_rows, max_len]，请求第 pos 个 token 的槽位是 page_table[table_idx[i], pos]。
    第 i 个新 token 只看见位置 0 … cached_len + i 的 key（右下角对齐），分数乘 D ** -0.5，
    query 头 h 用 KV 头 h // (Hq // Hkv)。返回 [T, Hq, D]，dtype 与 q 相同。
    参数对不上时抛 ValueError（见题目）。
    """
    raise NotImplementedError
