# 作弊：词表不补零（向下取整）
# 为什么必须判错：题目要求 embed_tokens、lm_head 每个 rank 存 div_ceil(vocab, tp) 行（不够的补零）；它向下取整，词表不能被 tp 整除时行数少了（151936 在 TP=16 时应是 9496 行），参数量也不对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_shapes = rank_shapes
def rank_shapes(config, tp_size):
    shapes = _orig_shapes(config, tp_size)
    rows = config["vocab_size"] // tp_size
    for key in ("embed_tokens", "lm_head"):
        if shapes[key] is not None:
            shapes[key] = (rows,) + tuple(shapes[key][1:])
    return shapes
