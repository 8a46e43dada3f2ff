# 作弊：位置从 0 数（忘了 cached_len）
# 为什么必须判错：它绕过了这道题的要点（位置从 0 数（忘了 cached_len）），只在测试没查到的地方才“对”。
# 判词里要有：位置从 0 数了
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def input_indices(reqs):
    lens = [r[2] - r[1] for r in reqs]
    rows = [r[0] for r, n in zip(reqs, lens) for _ in range(n)]
    positions = [p for n in lens for p in range(n)]
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64)
