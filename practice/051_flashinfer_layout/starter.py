"""练习 051 · FlashInfer 的元数据：从页表排出 qo_indptr、kv_indptr、kv_indices、last_page_len（第 17 章 更快的注意力后端）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def flashinfer_layout(table: list[list[int]], reqs: list[tuple[int, int, int]], page_size: int) -> dict:
    """reqs 每项是 (row, extend_len, device_len)。返回
    {"qo_indptr": [...], "kv_indptr": [...], "kv_indices": [...], "last_page_len": [...]}（都是 list[int]）。

    page_size < 1、reqs 为空、row 越界、长度不满足 1 <= extend_len <= device_len <= len(table[row])，
    或者槽位不符合“第 j 个 token 在第 j // page_size 页、偏移 j % page_size”时抛 ValueError。
    """
    raise NotImplementedError
