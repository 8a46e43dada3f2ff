# 作弊：padded_capacity 只把 num_pairs 向上取整到 block_size 的倍数，不算每个专家要补的行
# 为什么必须判错：题目要求上界是 num_pairs + num_experts·(block_size − 1) 再取整：每个专家最多补 block_size − 1 行。只取整 num_pairs，路由一偏（好几个专家各多出一个格子）补齐后的行数就超过了缓冲区，GPU 上写出界。
# 判词里要有：只把 num_pairs 取整
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked_capacity = padded_capacity


def padded_capacity(num_pairs, num_experts, block_size):
    _checked_capacity(num_pairs, num_experts, block_size)
    return (num_pairs + block_size - 1) // block_size * block_size
