# 作弊：先把掩码写进缓冲区，再检查参数
# 为什么必须判错：题目要求坏参数抛 ValueError 而且不改动缓冲区；半路改了缓冲区再报错，上一份还在用这块缓冲区的图就读到了一半新一半旧的元数据。
# 判词里要有：改动了缓冲区
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_fill = fill_static_metadata


def fill_static_metadata(kv_indices, key_mask, static_indices, static_mask):
    if static_mask.dtype == torch.bool and static_mask.dim() == 2 and key_mask.dim() == 2:
        static_mask.fill_(False)
    _fill(kv_indices, key_mask, static_indices, static_mask)
