# 作弊：visible 按左上对齐算：请求里的第 i 个 query 看前 i + 1 个 key
# 为什么必须判错：题目要求右下对齐：query 是序列的最后 n_q 个 token；有缓存前缀（n_k > n_q）时左上对齐只看得见前缀的开头，decode 时每个 token 只看见第一个 key。
# 判词里要有：左上对齐
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def token_owner_and_visible(qo_indptr, seq_lens_k, num_tokens):
    if qo_indptr.dim() != 1 or seq_lens_k.dim() != 1 or qo_indptr.shape[0] != seq_lens_k.shape[0] + 1:
        raise ValueError("形状不对")
    if num_tokens < 0:
        raise ValueError("负数")
    indptr = qo_indptr.long()
    t = torch.arange(num_tokens)
    owner = torch.searchsorted(indptr, t, right=True) - 1
    return owner, t - indptr[owner] + 1
