# 作弊：只查批里最后一个请求的 (cached_len, device_len)（旧测试的坏请求都排在末尾）
# 为什么必须判错：批里任何一个 cached_len >= device_len 的请求都没有 token 可算、拿不到 logits，负的 cached_len 会让位置从负数开始；坏请求不会只排在最后。只看末尾，前面的坏请求照样算出一个 0 或负的 extend_len，后面的 positions、cu_seqlens 全错位
# 判词里要有：spans 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def extend_lens(spans):
    if spans and not (0 <= spans[-1][0] < spans[-1][1]):
        raise ValueError("请求的长度不合法")
    return [device_len - cached_len for cached_len, device_len in spans]
