# 作弊：在输入的 dtype 里算（不转 float32）
# 为什么必须判错：题目要求先转 float32 再算、算完转回；它在输入 dtype 里平方求均值，fp16 输入里几百的大数平方溢出成 inf、整行变 0，小数掉进非规格化数丢精度，bf16/fp16 超出容差。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError("weight 形状不对")
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.to(x.dtype)
