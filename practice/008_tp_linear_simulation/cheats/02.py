# 作弊：不调用 rank_mlp，直接算不切的 MLP
# 为什么必须判错：题目要求 tp_mlp 对每个 rank 调用 rank_mlp 再把部分和加起来；它根本不调用 rank_mlp、直接算不切的 MLP，数值虽然一样，测试数 rank_mlp 的调用次数时就露馅。
# 判词里要有：rank_mlp
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def tp_mlp(x, gate, up, down, size):
    for rank in range(size):
        gate_up_shard(gate, up, rank, size)
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T
