# 作弊：不看 positions，按行号旋转
# 为什么必须判错：它绕过了这道题的要点（不看 positions，按行号旋转），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_apply = apply_rope
def apply_rope(positions, q, k, cos, sin):
    _orig_apply(positions, q, k, cos, sin)  # 只为参数检查
    return _orig_apply(torch.arange(positions.shape[0]), q, k, cos, sin)
