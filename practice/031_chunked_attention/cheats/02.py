# 作弊：左上对齐的掩码（is_causal 的样子）
# 为什么必须判错：题目要求每块的掩码右下对齐：query s + i 能看见 key j 当且仅当 j <= s + i；它用 tril（左上对齐），第二块起的 query 看不到前面各块的大部分 key，输出不对。
# 判词里要有：左上对齐
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def chunked_attention(q, k, v, chunk, attend):
    n = q.shape[0]
    if k.shape[0] != n or v.shape[0] != n:
        raise ValueError("行数不一样")
    outputs = []
    for s, e in _chunks(n, chunk):
        mask = torch.ones(e - s, e, dtype=torch.bool).tril()
        outputs.append(attend(q[s:e], k[:e], v[:e], mask))
    return torch.cat(outputs)
