# 作弊：默认档位用 2 的幂（1、2、4、8、16、32……）
# 为什么必须判错：题目要求 8 以后每 8 个一档；2 的幂在大批时档位太稀，100 个请求要补到 128，白算 28 个。
# 判词里要有：capture_sizes
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_sizes = capture_sizes


def capture_sizes(explicit, max_bs, max_running_req):
    if explicit is not None:
        return _sizes(explicit, max_bs, max_running_req)
    _sizes(None, max_bs, max_running_req)  # 只为了同样地检查参数
    out, bs = [], 1
    while bs <= max_bs:
        out.append(bs)
        bs *= 2
    return [b for b in out if b <= max_running_req]
