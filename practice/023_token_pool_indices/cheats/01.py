# 作弊：新 token 写在 device_len - 1（覆盖了最后一个输入 token）
# 为什么必须判错：题目要求新 token 写在前向之前的 device_len 这个位置（最后一步写到 -1）；它写在 device_len - 1，覆盖了这一步最后一个输入 token，下一步从 token 池里取到的序列就不对了。
# 判词里要有：写在了 device_len - 1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def write_indices(reqs):
    return (torch.tensor([r[0] for r in reqs], dtype=torch.int64),
            torch.tensor([r[2] - 1 for r in reqs], dtype=torch.int64))
