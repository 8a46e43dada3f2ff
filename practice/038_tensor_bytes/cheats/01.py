# 作弊：bfloat16 先转成 float32 再取字节
# 为什么必须判错：它绕过了这道题的要点（bfloat16 先转成 float32 再取字节），只在测试没查到的地方才“对”。
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
