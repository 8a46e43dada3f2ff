# 作弊：调用每个 rank 的 rank_mlp，却把部分和扔掉、返回不切的 MLP
# 为什么必须判错：题目要求 tp_mlp 返回的正是各 rank 的 rank_mlp 部分和之和（模拟 all-reduce）；它算完部分和就扔掉、另算一遍完整 MLP 交上去，测试在 rank_mlp 返回值上做的记号不会出现在结果里。
# 判词里要有：记号
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def tp_mlp(x, gate, up, down, size):
    for rank in range(size):
        rank_mlp(x, gate_up_shard(gate, up, rank, size), row_shard(down, rank, size))
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T
