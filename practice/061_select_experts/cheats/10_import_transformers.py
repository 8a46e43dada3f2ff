# 作弊：导入 transformers，拿 HF 的 Qwen3MoeTopKRouter 来算路由
# 为什么必须判错：题目要求自己写路由，模块里不导入 transformers：引擎的 select_experts 不依赖它，推理时也不该为一个 softmax 和 topk 拖进整个 transformers。
# 判词里要有：transformers
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

from transformers import Qwen3MoeConfig
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    _select(router_logits, top_k, renormalize)  # 只借它查参数
    e = router_logits.shape[1]
    router = Qwen3MoeTopKRouter(Qwen3MoeConfig(hidden_size=e, num_experts=e, num_experts_per_tok=top_k,
                                               norm_topk_prob=renormalize))
    with torch.no_grad():
        router.weight.copy_(torch.eye(e))  # logits @ I.T 就是 logits 本身
        _, weights, ids = router(router_logits.float())
    return weights, ids.to(torch.int32)
