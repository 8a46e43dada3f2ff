# 作弊：词表不补零（向下取整）
# 为什么必须判错：它绕过了这道题的要点（词表不补零（向下取整）），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_shapes = rank_shapes
def rank_shapes(config, tp_size):
    shapes = _orig_shapes(config, tp_size)
    rows = config["vocab_size"] // tp_size
    for key in ("embed_tokens", "lm_head"):
        if shapes[key] is not None:
            shapes[key] = (rows,) + tuple(shapes[key][1:])
    return shapes
