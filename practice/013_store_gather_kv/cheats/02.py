# 作弊：逐个 token 循环写、循环读
# 为什么必须判错：题目要求一次读写整批、不按 token 循环（先 .tolist() 再逐个写也算循环）；它逐个 token 写、逐个读，40 个 token 的 torch 运算次数是 2 个 token 时的很多倍。
# 判词里要有：运算次数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def store_kv(k_buf, v_buf, k, v, out_loc):
    expected = (out_loc.shape[0], *k_buf.shape[1:])
    if tuple(k.shape) != expected or tuple(v.shape) != expected:
        raise ValueError("形状不对")
    for i, slot in enumerate(out_loc.tolist()):
        k_buf[slot] = k[i]
        v_buf[slot] = v[i]

def gather_kv(k_buf, v_buf, page_table_row, length):
    if not (0 <= length <= page_table_row.shape[0]):
        raise ValueError("length 不对")
    slots = page_table_row[:length].tolist()
    if not slots:
        return k_buf[:0].clone(), v_buf[:0].clone()
    return torch.stack([k_buf[s] for s in slots]), torch.stack([v_buf[s] for s in slots])
