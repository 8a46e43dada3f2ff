# 作弊：最后一个 token 也写在 device_len（不按题目写到 -1）
# 为什么必须判错：它绕过了这道题的要点（最后一个 token 也写在 device_len（不按题目写到 -1）），只在测试没查到的地方才“对”。
# 判词里要有：它要写到 -1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def write_indices(reqs):
    return (torch.tensor([r[0] for r in reqs], dtype=torch.int64),
            torch.tensor([r[2] for r in reqs], dtype=torch.int64))
