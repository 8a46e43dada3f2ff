# 作弊：不看 positions，按行号旋转
# 为什么必须判错：题目要求第 i 行按 positions[i] 旋转；它按行号 0…T-1 旋转，prefill 位置从缓存长度开始时、decode 批位置乱序（如 [17, 3, 250]）时全错，只有位置恰好是 0…T-1 时碰巧对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_apply = apply_rope
def apply_rope(positions, q, k, cos, sin):
    _orig_apply(positions, q, k, cos, sin)  # 只为参数检查
    return _orig_apply(torch.arange(positions.shape[0]), q, k, cos, sin)
