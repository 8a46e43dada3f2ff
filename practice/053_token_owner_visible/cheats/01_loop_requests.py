# 作弊：逐个请求循环，用 torch.full / arange 拼出每个请求的那一段，再 cat
# 为什么必须判错：题目要求整批一次算、torch 运算次数不随批大小增长；逐个请求循环时，几百个请求就是上千次小运算，每次还要把长度取回 Python，图捕获录不下来。
# 判词里要有：随批大小增长｜取回了 Python

import torch


def token_owner_and_visible(qo_indptr, seq_lens_k, num_tokens):
    if qo_indptr.dim() != 1 or seq_lens_k.dim() != 1 or qo_indptr.shape[0] != seq_lens_k.shape[0] + 1:
        raise ValueError("形状不对")
    if num_tokens < 0:
        raise ValueError("负数")
    owners, visibles = [torch.zeros(0, dtype=torch.int64)], [torch.zeros(0, dtype=torch.int64)]
    for b in range(seq_lens_k.shape[0]):
        n_q = qo_indptr[b + 1] - qo_indptr[b]
        owners.append(torch.full((int(n_q),), b, dtype=torch.int64))
        visibles.append(torch.arange(int(n_q), dtype=torch.int64) + (seq_lens_k[b] - n_q + 1).long())
    return torch.cat(owners), torch.cat(visibles)
