# 作弊：attention_state 的 softmax 用缩放后的分数，lse 却用没乘 scale 的分数算
# 为什么必须判错：题目要求 lse 是缩放之后的分数 s = (q·k) × scale 的 log-sum-exp；权重 exp(lse) 和 softmax 的分母对不上，合并时各块的比例就错了。
# 判词里要有：scale
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_state = attention_state


def attention_state(q, k, v, scale):
    o, lse = _state(q, k, v, scale)
    if k.shape[0] == 0:
        return o, lse
    s = torch.einsum("thd,nhd->thn", q.float(), k.float())
    return o, torch.logsumexp(s, -1)
