# 作弊：激活写成 gate · silu(up)：把 w1 的前 I 行当成了 up
# 为什么必须判错：题目规定 w1_local 每个专家的前 I 行是 gate、后 I 行是 up，激活是 silu(gate) · up；两半用反了，每个专家的输出都是另一个函数，和加载进来的真实权重对不上。
# 判词里要有：silu
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids):
    out = torch.zeros_like(x)
    inter = w2_local.shape[2]
    for e in range(w1_local.shape[0]):
        token, slot = torch.where(local_topk_ids == e)
        if token.numel() == 0:
            continue
        h = x[token] @ w1_local[e].T
        y = (h[:, :inter] * F.silu(h[:, inter:])) @ w2_local[e].T
        out.index_add_(0, token, y * topk_weights[token, slot, None])
    return out
