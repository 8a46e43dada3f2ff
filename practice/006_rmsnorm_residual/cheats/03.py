# 作弊：eps 加在根号外面
# 为什么必须判错：题目要求 eps 在根号里面：x / sqrt(mean(x²) + eps)；它算成 x / (sqrt(mean(x²)) + eps)，float32 输入的容差很紧，eps 放错位置的输出超出容差。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError("weight 形状不对")
    h = x.float()
    h = h / (h.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)
    return (h * weight.float()).to(x.dtype)
