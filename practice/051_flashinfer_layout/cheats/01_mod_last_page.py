# 作弊：last_page_len 写成 device_len % page_size
# 为什么必须判错：题目要求最后一页用了几个槽位（1 到 page_size）；最后一页正好满时取模得到 0，FlashInfer 会当这一页一个 key 都没有，少看 page_size 个 key。
# 判词里要有：last_page_len
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_layout = flashinfer_layout


def flashinfer_layout(table, reqs, page_size):
    out = _layout(table, reqs, page_size)
    out["last_page_len"] = [d % page_size for _, _, d in reqs]
    return out
