# 作弊：最后一个 rank 的块不满 per 行时不补零行，直接返回 weight[start:stop]
# 为什么必须判错：题目要求每个 rank 的分片都是 [ceil(vocab / tp), dim]，短的那块末尾补零行；不补的话最后一个 rank 的形状和别人不一样，加载权重、分配缓冲区、all_gather 拼 logits（按 rank 等长切回去）全都对不上。
# 判词里要有：补零行
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def shard_embedding(weight, tp, rank):
    if weight.dim() != 2:
        raise ValueError("weight 应该是二维的")
    start, stop = vocab_block(weight.shape[0], tp, rank)
    return weight[start:stop]
