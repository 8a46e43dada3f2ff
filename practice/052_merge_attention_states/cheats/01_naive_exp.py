# 作弊：合并时直接用 exp(lse) 当权重，不先减去最大值
# 为什么必须判错：题目要求 lse 很大（几百、上万）时也不出 inf/nan；float32 的 exp 超过 88 就溢出成 inf，inf/inf 得 nan，长上下文、大分数的真实模型上合出来的是垃圾。
# 判词里要有：溢出｜inf｜nan
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def merge_states(outputs, lses):
    if not outputs or len(outputs) != len(lses):
        raise ValueError("长度不对")
    shape = outputs[0].shape
    if any(o.shape != shape for o in outputs) or any(l.shape != shape[:2] for l in lses):
        raise ValueError("形状不对")
    w = torch.exp(torch.stack([l.float() for l in lses]))
    total = w.sum(0)
    o = (w[..., None] * torch.stack([o.float() for o in outputs])).sum(0) / total[..., None]
    o = torch.where((total == 0)[..., None], torch.zeros_like(o), o)
    return o.to(outputs[0].dtype), torch.log(total)
