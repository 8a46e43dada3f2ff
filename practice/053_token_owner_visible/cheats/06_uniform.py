# 作弊：假设每个请求的 query 一样多：owner = t // (num_tokens // B)
# 为什么必须判错：题目的批次是不规则的（prefill 的各个提示长短不一，还有 0 个 query 的请求）；按平均长度切，token 会被算给别的请求，看见的是别人的 key。
# 判词里要有：owner
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def token_owner_and_visible(qo_indptr, seq_lens_k, num_tokens):
    if qo_indptr.dim() != 1 or seq_lens_k.dim() != 1 or qo_indptr.shape[0] != seq_lens_k.shape[0] + 1:
        raise ValueError("形状不对")
    if num_tokens < 0:
        raise ValueError("负数")
    B = seq_lens_k.shape[0]
    t = torch.arange(num_tokens)
    owner = (t // max(1, num_tokens // B)).clamp(max=B - 1)
    indptr = qo_indptr.long()
    later = indptr[owner + 1] - 1 - t
    return owner, seq_lens_k.long()[owner] - later
