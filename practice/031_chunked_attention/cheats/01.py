# 作弊：每块都给全部 key，靠掩码挡住后面的
# 为什么必须判错：题目要求第 [s, e) 块只给 k[:e]、v[:e]，不要多给后面的 key；它每块都给全部 n 个 key、靠掩码挡住，数值虽然对，分数矩阵却是 [e - s, n]，分块省下的内存没了。
# 判词里要有：后面的 key
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def chunked_attention(q, k, v, chunk, attend):
    n = q.shape[0]
    if k.shape[0] != n or v.shape[0] != n:
        raise ValueError("行数不一样")
    outputs = []
    for s, e in _chunks(n, chunk):
        mask = torch.arange(n)[None, :] <= torch.arange(s, e)[:, None]
        outputs.append(attend(q[s:e], k, v, mask))
    return torch.cat(outputs)
