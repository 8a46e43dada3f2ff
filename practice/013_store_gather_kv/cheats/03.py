# 作弊：store_kv 只比 k、v 的元素个数（numel），不比形状；形状不对就 reshape 成 [n, H, D] 照写
# 为什么必须判错：元素个数对、形状不对的 k（比如 [n, D, H]，或者摊平成 [n, H*D]）说明调用方把维度排错了，硬 reshape 会把第 h 个头的数写进别的头、别的维度，缓冲区里悄悄存进了乱掉的 K/V；题目要的是形状不对就抛 ValueError。旧测试的坏形状元素个数也都不对，分不出这两种检查
# 判词里要有：是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_store_kv = store_kv


def store_kv(k_buf, v_buf, k, v, out_loc):
    shape = (out_loc.shape[0], *k_buf.shape[1:])
    numel = shape[0] * shape[1] * shape[2]
    if k.numel() != numel or v.numel() != numel:
        raise ValueError("k、v 的大小不对")
    _store_kv(k_buf, v_buf, k.reshape(shape), v.reshape(shape), out_loc)
