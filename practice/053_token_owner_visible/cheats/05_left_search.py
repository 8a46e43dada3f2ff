# 作弊：searchsorted 不加 right=True（找第一个 >= t 的起点再减一）
# 为什么必须判错：题目允许 0 个 query 的请求，它的起点和下一个请求相同；不加 right=True 时，落在这种起点上的 token 被算给了前一个请求，而且每个请求的第一个 token 都归错了。
# 判词里要有：right=True｜owner
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def token_owner_and_visible(qo_indptr, seq_lens_k, num_tokens):
    if qo_indptr.dim() != 1 or seq_lens_k.dim() != 1 or qo_indptr.shape[0] != seq_lens_k.shape[0] + 1:
        raise ValueError("形状不对")
    if num_tokens < 0:
        raise ValueError("负数")
    indptr = qo_indptr.long()
    t = torch.arange(num_tokens)
    owner = (torch.searchsorted(indptr, t) - 1).clamp(min=0)
    later = indptr[owner + 1] - 1 - t
    return owner, seq_lens_k.long()[owner] - later
