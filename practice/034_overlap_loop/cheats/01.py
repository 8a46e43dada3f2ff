# 作弊：按 max_tokens 结束的请求少交最后一个 token（就像按发出的次数判断结束）
# 为什么必须判错：请求要拿满 max_tokens 个 token。重叠的循环里，发出的次数总比拿到的多一个，按它判断结束就正好少交最后一个
# 判词里要有：少了最后一个
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = overlap_generate


def overlap_generate(prompts, max_tokens, engine, num_rows, eos_id=None):
    # 像按发出的次数判断结束那样：按 max_tokens 结束的请求，最后一个 token 没交出来
    outputs = _reference(prompts, max_tokens, engine, num_rows, eos_id)
    return [out[:-1] if len(out) == m and out[-1] != eos_id else out for out, m in zip(outputs, max_tokens)]
