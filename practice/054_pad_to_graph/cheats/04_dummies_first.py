# 作弊：占位请求放在真实请求前面
# 为什么必须判错：题目要求占位请求跟在真实请求后面；采样只取前 batch.size 行的 logits，占位在前的话取到的是占位请求的结果。
# 判词里要有：rows｜positions｜out_loc
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_pad = pad_decode_batch


def pad_decode_batch(reqs, sizes, dummy):
    out = _pad(reqs, sizes, dummy)
    n = len(reqs)
    for key in ("rows", "positions", "out_loc"):
        out[key] = out[key][n:] + out[key][:n]
    return out
