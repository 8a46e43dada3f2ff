# 作弊：不看 cached_lens，从 0 开始算
# 为什么必须判错：题目要求只算位置 [cached_lens[i], input_lens[i])，前缀缓存命中的不再算；它不看 cached_lens、每个请求从 0 开始，命中缓存时白算了前缀，块的 start 和每步的批都不对。
# 判词里要有：cached_lens
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_plan = plan_prefill
def plan_prefill(input_lens, token_budget, cached_lens=None):
    if cached_lens is not None and len(cached_lens) != len(input_lens):
        raise ValueError("参数不对")
    return _orig_plan(input_lens, token_budget, None)
