# 作弊：把第一段和发出同时到（TTFT = 0）也当成坏参数
# 为什么必须判错：题面只把 chunks[0] < sent 算错，相等可以；服务器很闲、网络很近时 TTFT 量出来就是 0。
# 判词里要有：TTFT = 0
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig = summarize
def summarize(traces, makespan):
    out = _orig(traces, makespan)
    for t in traces:
        if t["chunks"][0] <= t["sent"]:   # off-by-one: rejects TTFT == 0, which the statement allows
            raise ValueError("chunks[0] <= sent")
    return out
