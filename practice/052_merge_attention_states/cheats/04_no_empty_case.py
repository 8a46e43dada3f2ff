# 作弊：合并时减去最大值，但不处理“全是 -inf”的位置
# 为什么必须判错：题目要求一个 (token, 头) 在所有块里都没有 key 时，结果是 o = 0、lse = -inf；不处理的话 -inf - (-inf) = nan，nan 会顺着下一层传遍整个批次。
# 判词里要有：nan
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def merge_states(outputs, lses):
    if not outputs or len(outputs) != len(lses):
        raise ValueError("长度不对")
    shape = outputs[0].shape
    if any(o.shape != shape for o in outputs) or any(l.shape != shape[:2] for l in lses):
        raise ValueError("形状不对")
    lse = torch.stack([l.float() for l in lses])
    m = lse.max(0).values
    w = torch.exp(lse - m)
    total = w.sum(0)
    o = (w[..., None] * torch.stack([o.float() for o in outputs])).sum(0) / total[..., None]
    return o.to(outputs[0].dtype), m + torch.log(total)
