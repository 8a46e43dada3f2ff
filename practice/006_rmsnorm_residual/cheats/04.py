# 作弊：weight 只比元素个数（weight.numel() == H），多了一维的 [1, H]、[H, 1] 也放过去
# 为什么必须判错：[H, 1] 的 weight 和 [..., H] 的 x 一乘就按广播算成 [..., H, H]，返回值的形状都变了；[1, H] 会给一维的 x 凭空多出一维。题目要的是 weight 的形状正好是 (H,)，旧测试的坏 weight 元素个数也都不对，分不出这两种检查
# 判词里要有：weight 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def rms_norm(x, weight, eps):
    if weight.numel() != x.shape[-1]:
        raise ValueError("weight 的大小应该是 x 的最后一维")
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (h * weight.float()).to(x.dtype)
