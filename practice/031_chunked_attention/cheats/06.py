# 作弊：只查 k 的行数，不查 v（旧评测里 k 和 v 总是一起少一行）
# 为什么必须判错：q、k、v 三个的行数都要一样；v 多了或少了一行，这份代码照样切片、调用 attend，算出来的不是题目要的结果。
# 判词里要有：行数不一样
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def chunked_attention(q, k, v, chunk, attend):
    n = q.shape[0]
    if k.shape[0] != n:
        raise ValueError(f"q 有 {n} 行，k 有 {k.shape[0]} 行")
    outputs = []
    for s, e in _chunks(n, chunk):
        q_pos = torch.arange(s, e)
        k_pos = torch.arange(e)
        mask = k_pos[None, :] <= q_pos[:, None]
        outputs.append(attend(q[s:e], k[:e], v[:e], mask))
    return torch.cat(outputs)
