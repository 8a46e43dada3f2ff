# 作弊：只检查每页的第一个槽位是不是 page_size 的倍数，页内的槽位不查
# 为什么必须判错：题目要求每个用到的槽位都守规则；页内某个槽位被改成别处时，FlashInfer 仍按“页号 × page_size + 偏移”去读原来的位置，读到的不是这个 token 的 K/V。
# 判词里要有：ValueError

def flashinfer_layout(table, reqs, page_size):
    if page_size < 1 or not reqs:
        raise ValueError("参数不对")
    qo, kv, indices, last = [0], [0], [], []
    for row, extend_len, device_len in reqs:
        if not 0 <= row < len(table) or not 1 <= extend_len <= device_len <= len(table[row]):
            raise ValueError("长度不对")
        firsts = table[row][:device_len:page_size]
        if any(s % page_size for s in firsts):
            raise ValueError("页首不对齐")
        pages = [s // page_size for s in firsts]
        qo.append(qo[-1] + extend_len)
        kv.append(kv[-1] + len(pages))
        indices += pages
        last.append(device_len - (len(pages) - 1) * page_size)
    return {"qo_indptr": qo, "kv_indptr": kv, "kv_indices": indices, "last_page_len": last}
