# 作弊：能走图就一律补到最大的档位
# 为什么必须判错：题目要求补到不小于请求数的最小档位；补到最大的档位，3 个请求的批要陪 157 个占位请求一起算，图省下的时间全赔进去了。
# 判词里要有：graph_bs
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_pad = pad_decode_batch


def pad_decode_batch(reqs, sizes, dummy):
    out = _pad(reqs, sizes, dummy)
    if out["graph_bs"] is not None:
        extra = sizes[-1] - out["graph_bs"]
        out["graph_bs"] = sizes[-1]
        out["rows"] += [dummy[0]] * extra
        out["positions"] += [dummy[1]] * extra
        out["out_loc"] += [dummy[2]] * extra
    return out
