# 作弊：linear_int4 把数据交给 numpy，在 numpy 里解出整块权重再乘
# 为什么必须判错：题目要求数据留在 torch 里、不造出整块的 [N, K]；搬到 numpy 里造整块，内存和带宽一样白费，只是躲开了对 torch 运算的测量。
# 判词里要有：numpy
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import numpy as np


def linear_int4(x, packed, d, m):
    n, k = _check_weight(packed, d, m)
    if x.dim() != 2 or x.dtype != torch.float32 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError("x")
    p = packed.numpy()
    q = np.concatenate([p & 0xF, p >> 4], axis=1).astype(np.float32).reshape(n, k // GROUP, GROUP)
    w = (q * d.numpy()[..., None] + m.numpy()[..., None]).reshape(n, k)
    return torch.from_numpy(x.contiguous().numpy() @ w.T)
