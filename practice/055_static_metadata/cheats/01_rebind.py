# 作弊：算好新的张量，赋给参数名（不原地写）
# 为什么必须判错：题目要求原地写进传进来的缓冲区：录好的图只认录制时的那两块内存，赋给参数名只是让局部变量指向了别处，图读到的还是上一次的内容。
# 判词里要有：原地
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_fill = fill_static_metadata


def fill_static_metadata(kv_indices, key_mask, static_indices, static_mask):
    new_indices, new_mask = static_indices.clone(), static_mask.clone()
    _fill(kv_indices, key_mask, new_indices, new_mask)
    static_indices, static_mask = new_indices, new_mask  # noqa: F841
