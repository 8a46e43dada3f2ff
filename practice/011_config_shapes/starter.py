"""练习 011 · 从 config.json 推出每个 rank 的权重形状（第 3 章 模型与权重加载）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def rank_shapes(config: dict, tp_size: int) -> dict[str, tuple[int, ...] | None]:
    """一个 rank 上各个权重的形状。

    返回的键正好是 embed_tokens、qkv_proj、o_proj、q_norm、k_norm、gate_up_proj、down_proj、
    input_layernorm、post_attention_layernorm、norm、lm_head；值是 int 组成的 tuple，
    或 None（不是 qwen3 时的 q_norm / k_norm，绑定时的 lm_head）。分不了时抛 ValueError。
    """
    raise NotImplementedError


def rank_param_count(config: dict, tp_size: int) -> int:
    """一个 rank 存的参数个数：embed_tokens + 层数 × 每层的 8 个 + norm + lm_head（None 算 0，补的零行也算）。"""
    raise NotImplementedError
