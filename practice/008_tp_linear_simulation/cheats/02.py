# 作弊：不调用 rank_mlp，直接算不切的 MLP
# 为什么必须判错：它绕过了这道题的要点（不调用 rank_mlp，直接算不切的 MLP），只在测试没查到的地方才“对”。
# 判词里要有：rank_mlp
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def tp_mlp(x, gate, up, down, size):
    for rank in range(size):
        gate_up_shard(gate, up, rank, size)
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T
