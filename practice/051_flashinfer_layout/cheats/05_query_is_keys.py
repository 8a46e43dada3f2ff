# 作弊：qo_indptr 按 device_len 累加（把全部 key 当成这一步的 query）
# 为什么必须判错：题目要求第 b 个请求的 query 是这一步的 extend_len 个 token；decode 时每个请求只有 1 个 query，按 key 数累加的话 qo_indptr 指到 q 张量外面去了。
# 判词里要有：qo_indptr
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_layout = flashinfer_layout


def flashinfer_layout(table, reqs, page_size):
    out = _layout(table, reqs, page_size)
    qo = [0]
    for _, _, device_len in reqs:
        qo.append(qo[-1] + device_len)
    out["qo_indptr"] = qo
    return out
