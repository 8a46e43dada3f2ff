# 作弊：不查参数，什么都直接交给 torch
# 为什么必须判错：题目要求 top_k 不是 1 到 E 之间的 int（True 也不算）、logits 不是二维的浮点张量或是空的时抛 ValueError；不查的话 top_k=True 被当成 1、整数的 logits 在 softmax 里被悄悄转成浮点，错的配置一路跑下去，或者在 torch 深处报一个看不懂的 RuntimeError。
# 判词里要有：ValueError


import torch


def select_experts(router_logits, top_k, renormalize):
    weights, ids = torch.topk(torch.softmax(router_logits, dim=-1, dtype=torch.float32), top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)
