# 作弊：新 token 写在 device_len - 1（覆盖了最后一个输入 token）
# 为什么必须判错：它绕过了这道题的要点（新 token 写在 device_len - 1（覆盖了最后一个输入 token）），只在测试没查到的地方才“对”。
# 判词里要有：写在了 device_len - 1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def write_indices(reqs):
    return (torch.tensor([r[0] for r in reqs], dtype=torch.int64),
            torch.tensor([r[2] - 1 for r in reqs], dtype=torch.int64))
