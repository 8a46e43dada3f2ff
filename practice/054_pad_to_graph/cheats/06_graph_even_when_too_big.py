# 作弊：请求数比最大档位还多时，graph_bs 照样报最大的档位（不补、也不截）
# 为什么必须判错：题目要求这时不走图（graph_bs 是 None）；说走大小为 max 的图，却交给它更多的请求，图只算前 max 个，后面的请求拿不到结果。
# 判词里要有：graph_bs
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_pad = pad_decode_batch


def pad_decode_batch(reqs, sizes, dummy):
    out = _pad(reqs, sizes, dummy)
    if out["graph_bs"] is None and sizes:
        out["graph_bs"] = sizes[-1]
    return out
