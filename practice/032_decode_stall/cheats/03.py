# 作弊：每块都按从 0 开始计时（不看块在提示里的位置）
# 为什么必须判错：题目要求 [s, e) 这一块用时 prefill_ms(s, e)（越靠后的块看的 key 越多）；它把每块都按 prefill_ms(0, e - s) 计时，用时随 s 变化的计时函数下 TTFT 和最大间隔都不对。
# 判词里要有：真实位置
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_simulate = simulate
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    return _orig_simulate(decode_left, prompt_len, token_budget, decode_between_chunks,
                          lambda s, e: prefill_ms(0, e - s), decode_ms)
