# 作弊：不检查两个请求是否在同一行、写同一个槽位，也不查占位行和占位槽位
# 为什么必须判错：题目要求这种批抛 ValueError；两个请求写同一个槽位，后写的那个盖掉前一个的 K/V，之后它读到的是别人的缓存。
# 判词里要有：ValueError

def capture_sizes(explicit, max_bs, max_running_req):
    if isinstance(max_bs, bool) or not isinstance(max_bs, int) or max_bs < 0:
        raise ValueError("max_bs")
    if isinstance(max_running_req, bool) or not isinstance(max_running_req, int) or max_running_req < 1:
        raise ValueError("max_running_req")
    if explicit is not None:
        if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in explicit):
            raise ValueError("档位")
        sizes = set(explicit)
    else:
        sizes = {bs for bs in (1, 2, 4) if bs <= max_bs} | set(range(8, max_bs + 1, 8))
    return sorted(bs for bs in sizes if bs <= max_running_req)


def pad_decode_batch(reqs, sizes, dummy):
    if not reqs:
        raise ValueError("空")
    if any(bs < 1 for bs in sizes) or any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise ValueError("档位表")
    n = len(reqs)
    graph_bs = next(bs for bs in sizes if bs >= n) if sizes and n <= sizes[-1] else None
    padded = list(reqs) + [tuple(dummy)] * ((graph_bs or n) - n)
    return {"graph_bs": graph_bs, "rows": [r for r, _, _ in padded],
            "positions": [p for _, p, _ in padded], "out_loc": [s for _, _, s in padded]}
