# 作弊：每块都按从 0 开始计时（不看块在提示里的位置）
# 为什么必须判错：它绕过了这道题的要点（每块都按从 0 开始计时（不看块在提示里的位置）），只在测试没查到的地方才“对”。
# 判词里要有：真实位置
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_simulate = simulate
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    return _orig_simulate(decode_left, prompt_len, token_budget, decode_between_chunks,
                          lambda s, e: prefill_ms(0, e - s), decode_ms)
