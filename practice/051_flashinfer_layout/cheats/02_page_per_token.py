# 作弊：kv_indices 每个 token 放一次它的页号，kv_indptr 跟着按 token 数累加
# 为什么必须判错：题目要求 kv_indices 是每个请求用到的页，一页一次；按 token 放的话页号重复 page_size 次，FlashInfer 会把同一页读 page_size 遍。
# 判词里要有：kv_indices｜kv_indptr
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_layout = flashinfer_layout


def flashinfer_layout(table, reqs, page_size):
    out = _layout(table, reqs, page_size)
    indices, indptr = [], [0]
    for row, _, device_len in reqs:
        indices += [table[row][j] // page_size for j in range(device_len)]
        indptr.append(indptr[-1] + device_len)
    out["kv_indices"], out["kv_indptr"] = indices, indptr
    return out
