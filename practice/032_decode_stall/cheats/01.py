# 作弊：不看 decode_between_chunks，总是 prefill 优先
# 为什么必须判错：题目要求 decode_between_chunks 为真时，上一步是没算完整段的一块、还有请求在 decode，这一步就 decode；它总是 prefill 优先，打开开关时的步骤、最大间隔、TTFT 全和参考不一样。
# 判词里要有：decode_between_chunks
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_simulate = simulate
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    return _orig_simulate(decode_left, prompt_len, token_budget, False, prefill_ms, decode_ms)
