# 作弊：span 的检查写在了循环外面，只查到最后一个请求（循环变量 cached、device 留下的是最后一次的值）
# 为什么必须判错：题目要求批里任何一个请求不满足 0 <= cached_len < device_len 都抛 ValueError；坏的请求排在前面或中间时（比如 [(0, 3), (7, 2), (4, 6)]）它照样往下算，q_lens 里出现 0 或负数，cu_seqlens_q 不再递增，后面的请求切到的 query 全都错位
# 判词里要有：spans 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def build_metadata(spans):
    q_lens, k_lens, positions, req_of_token = [], [], [], []
    for req, (cached, device) in enumerate(spans):
        q_lens.append(device - cached)
        k_lens.append(device)
        positions.extend(range(cached, device))
        req_of_token.extend([req] * (device - cached))
    if spans:
        _check_span(cached, device)  # 缩进错了：循环结束以后才查，只剩最后一个请求
    cu_q = _prefix_sums(q_lens)
    return VarlenMetadata(
        q_lens=q_lens,
        k_lens=k_lens,
        cu_seqlens_q=cu_q,
        cu_seqlens_k=_prefix_sums(k_lens),
        max_seqlen_q=max(q_lens, default=0),
        max_seqlen_k=max(k_lens, default=0),
        positions=positions,
        req_of_token=req_of_token,
        last_indices=[end - 1 for end in cu_q[1:]],
    )
