# 作弊：visible 少算自己：n_k − (后面还有几个 query) − 1
# 为什么必须判错：题目要求第 i 个 query 看得见前 n_k − n_q + i + 1 个 key，它自己的 key 也在里面；少一个的话 decode 的 token 看不见自己，整个模型的输出都偏了。
# 判词里要有：少了 1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_f = token_owner_and_visible


def token_owner_and_visible(qo_indptr, seq_lens_k, num_tokens):
    owner, visible = _f(qo_indptr, seq_lens_k, num_tokens)
    return owner, visible - 1
