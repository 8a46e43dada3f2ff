# 作弊：q 直接 .to(torch.uint8)，不先四舍五入
# 为什么必须判错：题目要求 q = round((w - m) / d)：转整数是截断，每个权重都往 m 那边偏，误差最大一整个刻度 d，超过了 d / 2；整层的输出系统性地偏一点。
# 判词里要有：q｜d / 2
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def quantize_int4(w):
    if w.dim() != 2 or w.dtype != torch.float32 or w.shape[1] == 0 or w.shape[1] % 64:
        raise ValueError("w")
    n, k = w.shape
    groups = w.reshape(n, k // GROUP, GROUP)
    m = groups.amin(dim=-1)
    d = (groups.amax(dim=-1) - m) / 15
    q = ((groups - m[..., None]) / d.clamp_min(1e-30)[..., None]).clamp(0, 15).to(torch.uint8).reshape(n, k)
    return (q[:, : k // 2] | (q[:, k // 2:] << 4)).contiguous(), d.contiguous(), m.contiguous()
