# 作弊：不看 decode_between_chunks，总是 prefill 优先
# 为什么必须判错：它绕过了这道题的要点（不看 decode_between_chunks，总是 prefill 优先），只在测试没查到的地方才“对”。
# 判词里要有：decode_between_chunks
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_simulate = simulate
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    return _orig_simulate(decode_left, prompt_len, token_budget, False, prefill_ms, decode_ms)
