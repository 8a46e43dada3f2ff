# 作弊：把两个张量 .tolist() 取回 Python，逐个 token 算好，再变回张量（torch 运算只有常数次）
# 为什么必须判错：题目要求不把张量里的数取回 Python；GPU 上这一取就要等 GPU 把前面的活全做完，元数据就成了每一步的同步点。
# 判词里要有：tolist

import torch


def token_owner_and_visible(qo_indptr, seq_lens_k, num_tokens):
    if qo_indptr.dim() != 1 or seq_lens_k.dim() != 1 or qo_indptr.shape[0] != seq_lens_k.shape[0] + 1:
        raise ValueError("形状不对")
    if num_tokens < 0:
        raise ValueError("负数")
    indptr, lens = qo_indptr.tolist(), seq_lens_k.tolist()
    owner, visible = [], []
    for b in range(len(lens)):
        n_q = indptr[b + 1] - indptr[b]
        for i in range(n_q):
            owner.append(b)
            visible.append(lens[b] - n_q + i + 1)
    return torch.tensor(owner, dtype=torch.int64), torch.tensor(visible, dtype=torch.int64)
