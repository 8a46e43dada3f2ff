# 作弊：不检查槽位守不守规则，直接取每页第一个槽位 // page_size
# 为什么必须判错：题目要求槽位不符合“第 j 个 token 在第 j // page_size 页、偏移 j % page_size”时抛 ValueError；FlashInfer 只拿页号、偏移自己算，这样的页表交给它就会静悄悄地读错槽位。
# 判词里要有：ValueError

def flashinfer_layout(table, reqs, page_size):
    if page_size < 1 or not reqs:
        raise ValueError("参数不对")
    qo, kv, indices, last = [0], [0], [], []
    for row, extend_len, device_len in reqs:
        if not 0 <= row < len(table) or not 1 <= extend_len <= device_len <= len(table[row]):
            raise ValueError("长度不对")
        pages = [s // page_size for s in table[row][:device_len:page_size]]
        qo.append(qo[-1] + extend_len)
        kv.append(kv[-1] + len(pages))
        indices += pages
        last.append(device_len - (len(pages) - 1) * page_size)
    return {"qo_indptr": qo, "kv_indptr": kv, "kv_indices": indices, "last_page_len": last}
