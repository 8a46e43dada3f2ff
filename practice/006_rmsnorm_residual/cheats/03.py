# 作弊：eps 加在根号外面
# 为什么必须判错：它绕过了这道题的要点（eps 加在根号外面），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError("weight 形状不对")
    h = x.float()
    h = h / (h.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)
    return (h * weight.float()).to(x.dtype)
