# 作弊：位置从 0 数（忘了 cached_len）
# 为什么必须判错：题目要求输入的位置是 [cached_len, device_len)；它每个请求都从 0 数，decode 和命中缓存的 prefill（cached_len > 0）取到的是序列开头的 token，不是这一步要算的那些。
# 判词里要有：位置从 0 数了
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def input_indices(reqs):
    lens = [r[2] - r[1] for r in reqs]
    rows = [r[0] for r, n in zip(reqs, lens) for _ in range(n)]
    positions = [p for n in lens for p in range(n)]
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64)
