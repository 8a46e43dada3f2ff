# 作弊：store_kv 写进一份拷贝（不是原地）
# 为什么必须判错：题目要求 store_kv 原地写进 k_buf、v_buf；它写进一份 clone，调用者的缓冲区一行都没变，之后 gather_kv 取回来的不是当初写进去的 K、V。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def store_kv(k_buf, v_buf, k, v, out_loc):
    expected = (out_loc.shape[0], *k_buf.shape[1:])
    if tuple(k.shape) != expected or tuple(v.shape) != expected:
        raise ValueError("形状不对")
    k_buf = k_buf.clone()
    v_buf = v_buf.clone()
    k_buf[out_loc] = k
    v_buf[out_loc] = v
