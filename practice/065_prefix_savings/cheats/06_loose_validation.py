# 作弊：算得对，参数查得松：提示是 tuple 或字符串也照算，token 只拦负数、bool、float
# 为什么必须判错：题目要求提示是列表、token 是 ≥ 0 的整数；字符串 'abd' 会被当成三个“token”算出一个数来。
# 判词里要有：应该抛出 ValueError

def prefill_costs(batches, page_size):
    if type(page_size) is not int or page_size < 1:
        raise ValueError
    if not isinstance(batches, list):
        raise ValueError
    for batch in batches:
        if not isinstance(batch, list) or not batch:
            raise ValueError
        for p in batch:
            if len(p) == 0:                      # prompt need not be a list: tuples / strings accepted
                raise ValueError
            for t in p:
                if isinstance(t, (bool, float)) or (isinstance(t, int) and t < 0):
                    raise ValueError            # only rejects bool/float/negative: "a", None, 1j accepted
    cached, out = [], []
    for batch in batches:
        row = []
        for p in batch:
            key = list(p[:-1])
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
