# 作弊：top_k、top_p 的形状只比了长度（len(top_k) == B），多了一维的 [B, 1] 也放过去
# 为什么必须判错：[B, 1] 的 top_p 和 [B, V] 的概率一比较就按广播算，每一行拿到的不再是自己的那个 p，过滤出来的 token 是错的（或者在后面哪一步莫名其妙地崩掉）；题目要的是形状正好是 [B]。旧测试的坏形状只有长度不对的和 [1, B]，len() 都看得出来
# 判词里要有：是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_filter = top_k_top_p_filter


def top_k_top_p_filter(logits, top_k, top_p):
    if logits.dim() != 2:
        raise ValueError("logits 应该是二维的")
    B = logits.shape[0]
    if len(top_k) != B or len(top_p) != B:
        raise ValueError("top_k、top_p 的长度应该是 B")
    if top_k.dim() == 1 and top_p.dim() == 1:
        return _filter(logits, top_k, top_p)
    if bool(((top_k == 0) | (top_k < -1)).any()) or not bool(((top_p > 0) & (top_p <= 1)).all()):
        raise ValueError("top_k 或 top_p 不对")
    return _filter(logits, top_k.reshape(B), top_p.reshape(B))
