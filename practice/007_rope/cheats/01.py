# 作弊：相邻两维成对（交错排布）
# 为什么必须判错：它绕过了这道题的要点（相邻两维成对（交错排布）），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _rotate(x, c, s):
    h = x.float()
    x1, x2 = h[..., 0::2], h[..., 1::2]
    out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    return out.to(x.dtype)
