# 作弊：不看 cached_lens，从 0 开始算
# 为什么必须判错：它绕过了这道题的要点（不看 cached_lens，从 0 开始算），只在测试没查到的地方才“对”。
# 判词里要有：cached_lens
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_plan = plan_prefill
def plan_prefill(input_lens, token_budget, cached_lens=None):
    if cached_lens is not None and len(cached_lens) != len(input_lens):
        raise ValueError("参数不对")
    return _orig_plan(input_lens, token_budget, None)
