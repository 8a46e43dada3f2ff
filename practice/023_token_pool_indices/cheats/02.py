# 作弊：最后一个 token 也写在 device_len（不按题目写到 -1）
# 为什么必须判错：题目要求请求最后一步（device_len + 1 == max_device_len）的新 token 写到这一行最后一列 -1；它照样写在 device_len，最后一步的写回下标和参考不一样。
# 判词里要有：它要写到 -1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def write_indices(reqs):
    return (torch.tensor([r[0] for r in reqs], dtype=torch.int64),
            torch.tensor([r[2] for r in reqs], dtype=torch.int64))
