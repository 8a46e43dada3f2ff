# 作弊：head_dim 只查了奇数和 0（`if head_dim % 2 or not head_dim`），负的偶数照样往下算
# 为什么必须判错：head_dim 是 -4 这样的负偶数时 `% 2` 是 0、`not head_dim` 是 False，两个都查不出来，往下走到 `arange(0, head_dim, 2)` 才由 torch 抛出一个看不懂的 RuntimeError（步长和区间方向不一致），调用方按题目约定去接的 ValueError 接不住。题目要的是不是正数就抛 ValueError，旧测试只拿 0 试过
# 判词里要有：head_dim 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def rope_cache(head_dim, max_position, base):
    if head_dim % 2 or not head_dim:
        raise ValueError("head_dim 必须是偶数")
    if max_position <= 0:
        raise ValueError("max_position 必须是正数")
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()
