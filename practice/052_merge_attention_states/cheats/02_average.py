# 作弊：合并就是把各块的 o 平均一下（空块不算），lse 取最大的
# 为什么必须判错：题目要求按每块的 softmax 分母 exp(lse) 加权；key 多、分数高的块应该占大头，平均以后每块一样重，结果和整块的注意力对不上。
# 判词里要有：不对｜不一样
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def merge_states(outputs, lses):
    if not outputs or len(outputs) != len(lses):
        raise ValueError("长度不对")
    shape = outputs[0].shape
    if any(o.shape != shape for o in outputs) or any(l.shape != shape[:2] for l in lses):
        raise ValueError("形状不对")
    lse = torch.stack([l.float() for l in lses])
    alive = (~torch.isneginf(lse)).float()
    count = alive.sum(0)
    o = (alive[..., None] * torch.stack([o.float() for o in outputs])).sum(0) / count.clamp(min=1)[..., None]
    return o.to(outputs[0].dtype), lse.max(0).values
