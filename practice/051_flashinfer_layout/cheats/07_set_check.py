# 作弊：槽位规则按“集合”查：每页的槽位排序后正好是这一页的那几个，顺序不管
# 为什么必须判错：题目要求第 j 个 token 正好在它那一页的第 j % page_size 个位置；页内顺序一乱，FlashInfer 按“页号 × page_size + 偏移”读到的是同一页里别的 token 的 K/V。
# 判词里要有：ValueError

def flashinfer_layout(table, reqs, page_size):
    if page_size < 1 or not reqs:
        raise ValueError("bad")
    qo, kv, idx, last = [0], [0], [], []
    for row, e, d in reqs:
        if not 0 <= row < len(table) or not 1 <= e <= d <= len(table[row]):
            raise ValueError("bad")
        slots = table[row][:d]
        pages = []
        for p0 in range(0, d, page_size):
            chunk = slots[p0:p0 + page_size]
            base = min(chunk) // page_size * page_size
            if sorted(chunk) != list(range(base, base + len(chunk))) or min(chunk) % page_size:
                raise ValueError("page rule")
            pages.append(base // page_size)
        qo.append(qo[-1] + e); kv.append(kv[-1] + len(pages)); idx += pages
        last.append(d - (len(pages) - 1) * page_size)
    return {"qo_indptr": qo, "kv_indptr": kv, "kv_indices": idx, "last_page_len": last}
