# 作弊：相邻两维成对（交错排布）
# 为什么必须判错：题目要求 rotate-half 排布：第 j 维和第 j + D/2 维成对旋转；它把相邻的第 2j、2j+1 维成对（交错排布），除了位置 0 以外的每个 token 都转错，和参考实现对不上。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _rotate(x, c, s):
    h = x.float()
    x1, x2 = h[..., 0::2], h[..., 1::2]
    out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    return out.to(x.dtype)
