"""练习 051 · FlashInfer 的元数据：从页表排出 qo_indptr、kv_indptr、kv_indices、last_page_len（第 17 章 更快的注意力后端）

参考答案。
"""

from __future__ import annotations


def flashinfer_layout(table: list[list[int]], reqs: list[tuple[int, int, int]], page_size: int) -> dict:
    """reqs 每项是 (row, extend_len, device_len)。返回
    {"qo_indptr": [...], "kv_indptr": [...], "kv_indices": [...], "last_page_len": [...]}（都是 list[int]）。

    page_size < 1、reqs 为空、row 越界、长度不满足 1 <= extend_len <= device_len <= len(table[row])，
    或者槽位不符合“第 j 个 token 在第 j // page_size 页、偏移 j % page_size”时抛 ValueError。
    """
    if page_size < 1:
        raise ValueError(f"page_size 要 >= 1，收到 {page_size}")
    if not reqs:
        raise ValueError("reqs 是空的")
    qo_indptr, kv_indptr, kv_indices, last_page_len = [0], [0], [], []
    for row, extend_len, device_len in reqs:
        if not 0 <= row < len(table):
            raise ValueError(f"行号 {row} 越界（页表有 {len(table)} 行）")
        if not 1 <= extend_len <= device_len <= len(table[row]):
            raise ValueError(f"第 {row} 行：要求 1 <= extend_len({extend_len}) <= device_len({device_len}) "
                             f"<= 行宽({len(table[row])})")
        slots = table[row][:device_len]
        pages = [slot // page_size for slot in slots[::page_size]]
        for j, slot in enumerate(slots):
            if slot != pages[j // page_size] * page_size + j % page_size:
                raise ValueError(f"第 {row} 行第 {j} 个 token 的槽位 {slot} 不在它那一页的第 {j % page_size} 个位置")
        qo_indptr.append(qo_indptr[-1] + extend_len)
        kv_indptr.append(kv_indptr[-1] + len(pages))
        kv_indices.extend(pages)
        last_page_len.append(device_len - (len(pages) - 1) * page_size)
    return {"qo_indptr": qo_indptr, "kv_indptr": kv_indptr, "kv_indices": kv_indices,
            "last_page_len": last_page_len}
