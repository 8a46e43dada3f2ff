# 作弊：每个 rank 按 vocab // tp 行切，余数全给最后一个 rank（它的块比别人长，不用补零）
# 为什么必须判错：题目要求每个 rank ceil(vocab / tp) 行、最后一个 rank 不够时补零；按 floor 切，最后一个 rank 的分片比别人大，各 rank 的形状不一样，而且 rank r 负责的区间和引擎里 start = rank × per 的约定对不上，查表时有的 id 两个 rank 都不认。
# 判词里要有：vocab // tp
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def vocab_block(vocab, tp, rank):
    if vocab <= 0 or tp <= 0 or not 0 <= rank < tp:
        raise ValueError("参数不对")
    per = vocab // tp
    return rank * per, vocab if rank == tp - 1 else (rank + 1) * per
