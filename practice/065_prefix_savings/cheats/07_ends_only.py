# 作弊：每个提示只查第一个和最后一个 token
# 为什么必须判错：坏的 token 可能在中间；测试在开头、中间、末尾都放一个。
# 判词里要有：应该抛出 ValueError

def _ok(t):
    return isinstance(t, int) and not isinstance(t, bool) and t >= 0

def prefill_costs(batches, page_size):
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise ValueError
    if not isinstance(batches, list):
        raise ValueError
    for batch in batches:
        if not isinstance(batch, list) or not batch:
            raise ValueError
        for p in batch:
            if not isinstance(p, list) or not p or not (_ok(p[0]) and _ok(p[-1])):   # only first/last token checked
                raise ValueError
    cached, out = [], []
    for batch in batches:
        row = []
        for p in batch:
            key = p[:-1]
            best = 0
            for s in cached:
                n = 0
                for a, b in zip(key, s):
                    if a != b:
                        break
                    n += 1
                best = max(best, n)
            row.append(len(p) - best // page_size * page_size)
        out.append(row)
        cached += [list(p) for p in batch]
    return out
