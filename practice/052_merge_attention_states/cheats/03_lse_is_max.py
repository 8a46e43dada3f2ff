# 作弊：attention_state 的 lse 交出最大的分数（不做 log-sum-exp），合并照参考答案
# 为什么必须判错：题目要求 lse = log Σ exp(s)；只交最大值的话，合并时每块的权重只看最高分，忽略了这块里 key 的个数和其他分数，合出来的输出是错的。
# 判词里要有：lse
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_state = attention_state


def attention_state(q, k, v, scale):
    o, lse = _state(q, k, v, scale)
    if k.shape[0] == 0:
        return o, lse
    s = torch.einsum("thd,nhd->thn", q.float(), k.float()) * scale
    return o, s.amax(-1)
