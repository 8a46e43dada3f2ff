# 作弊：自己按步长从存储里一个个取元素，却忘了切片的起点（storage_offset）
# 为什么必须判错：`x[3::2]` 这样的切片不从存储的开头开始；旧评测的张量和切片都从存储的第 0 个元素起，查不出来。buffer 必须是这个张量自己的元素。
# 判词里要有：buffer 的字节不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def tensor_to_wire(t):
    if t.dim() != 1:
        raise ValueError(f"只支持一维张量，收到形状 {tuple(t.shape)}")
    if t.dtype not in _NAMES:
        raise ValueError(f"不支持的类型 {t.dtype}")
    raw = bytes(t.untyped_storage())
    size = t.element_size()
    step = t.stride(0) * size  # 从存储的第 0 个字节数起：没有加上 t.storage_offset()
    return {"dtype": _NAMES[t.dtype], "buffer": b"".join(raw[i * step: i * step + size] for i in range(t.shape[0]))}
