# 作弊：不检查 page_size 是不是正数（0 碰巧在切片时报错，负数就照算）
# 为什么必须判错：题目要求 page_size < 1 时抛 ValueError；page_size 是 -1 时切片反着走，算出负的页号和胡乱的 last_page_len，交给 FlashInfer 就是越界读。
# 判词里要有：page_size
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_layout = flashinfer_layout


def flashinfer_layout(table, reqs, page_size):
    if page_size == 0:
        raise ValueError("page_size 是 0")
    if page_size > 0:
        return _layout(table, reqs, page_size)
    out = {"qo_indptr": [0], "kv_indptr": [0], "kv_indices": [], "last_page_len": []}
    for row, extend_len, device_len in reqs:
        pages = [s // page_size for s in table[row][:device_len][::page_size]]
        out["qo_indptr"].append(out["qo_indptr"][-1] + extend_len)
        out["kv_indptr"].append(out["kv_indptr"][-1] + len(pages))
        out["kv_indices"] += pages
        out["last_page_len"].append(device_len - (len(pages) - 1) * page_size)
    return out
