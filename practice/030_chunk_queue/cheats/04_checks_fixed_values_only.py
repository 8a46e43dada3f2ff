# 作弊：只认固定的几个坏值：token_budget 是 0、提示长度是 0、cached_len 是 -1 或正好等于 input_len
# 为什么必须判错：坏值可以是任何越界的数（-7、input_len + 3……）。固定的坏例子里恰好都是这几个值，只认它们的代码以前能过
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = plan_prefill


def plan_prefill(input_lens, token_budget, cached_lens=None):
    cached = [0] * len(input_lens) if cached_lens is None else cached_lens
    if token_budget == 0 or len(cached) != len(input_lens) or 0 in input_lens:
        raise ValueError("参数不对")
    if any(c == -1 or c == n for n, c in zip(input_lens, cached)):
        raise ValueError("cached_len 不对")
    inputs = [max(1, n) for n in input_lens]  # 别的坏值悄悄改好
    return _reference(inputs, max(1, token_budget), [min(max(0, c), n - 1) for n, c in zip(inputs, cached)])
