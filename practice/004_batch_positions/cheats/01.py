# 作弊：positions 每段从 0 开始
# 为什么必须判错：它绕过了这道题的要点（positions 每段从 0 开始），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def batch_positions(spans):
    extend_lens(spans)
    return [i for c, d in spans for i in range(d - c)]
