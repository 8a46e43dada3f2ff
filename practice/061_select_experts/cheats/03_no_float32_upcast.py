# 作弊：softmax 在输入的 dtype 里算，算完再 .float()
# 为什么必须判错：题目要求 softmax 无论输入是什么 dtype 都在 float32 里算：bfloat16 只有 8 位尾数，router 的概率在 bfloat16 里算，每个权重差到千分之几，两个专家的概率接近时连选哪个都可能选反。
# 判词里要有：bfloat16 / float16
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    _select(router_logits, top_k, renormalize)  # 只借它查参数
    weights, ids = torch.topk(torch.softmax(router_logits, dim=-1).float(), top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)
