# 作弊：positions 每段从 0 开始
# 为什么必须判错：题目要求 positions 从 cached_len 开始（前缀已在缓存里）；它每段从 0 数，命中前缀缓存的请求和 decode 批（位置应是 L-1）全错，只有 cached_len == 0 时碰巧对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def batch_positions(spans):
    extend_lens(spans)
    return [i for c, d in spans for i in range(d - c)]
