# 作弊：只查最后一个 decode 请求，prompt_len 和 token_budget 只认 0
# 为什么必须判错：坏的请求可以在列表的任何位置、坏值可以是任何 < 1 的数。固定的坏例子里坏的恰好在末尾、恰好是 0，只查那里的代码以前能过
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = simulate


def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    if prompt_len == 0 or token_budget == 0 or (decode_left and decode_left[-1] < 1):
        raise ValueError("参数不对")
    return _reference([max(1, n) for n in decode_left], max(1, prompt_len), max(1, token_budget),
                      decode_between_chunks, prefill_ms, decode_ms)
