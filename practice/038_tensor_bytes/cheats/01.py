# 作弊：bfloat16 先转成 float32 再取字节
# 为什么必须判错：题目要求 buffer 是各元素原始的字节（bfloat16 每个 2 字节，比特不变）；它把 bfloat16 先转 float32 再取字节，每个元素变成 4 字节，题目里的 bfloat16 例子就对不上。
# 判词里要有：题目里的 bfloat16 例子
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import numpy as np


def tensor_to_wire(t):
    if t.dim() != 1:
        raise ValueError("只支持一维张量")
    if t.dtype not in _NAMES:
        raise ValueError("不支持的类型")
    array = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return {"dtype": _NAMES[t.dtype], "buffer": array.tobytes()}
