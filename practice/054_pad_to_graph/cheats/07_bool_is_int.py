# 作弊：档位里的 True 当作 1 收下
# 为什么必须判错：题目要求 bool 不算整数；配置里写成 True 多半是把“开/关”填进了档位表，应当当场报错，而不是悄悄录一个大小为 1 的图。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_sizes = capture_sizes


def capture_sizes(explicit, max_bs, max_running_req):
    if explicit is not None:
        explicit = [int(x) if isinstance(x, bool) else x for x in explicit]
    return _sizes(explicit, max_bs, max_running_req)
