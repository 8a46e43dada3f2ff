"""练习 011 · 从 config.json 推出每个 rank 的权重形状 —— 参考答案。"""

from __future__ import annotations

KEYS = (
    "embed_tokens",
    "qkv_proj",
    "o_proj",
    "q_norm",
    "k_norm",
    "gate_up_proj",
    "down_proj",
    "input_layernorm",
    "post_attention_layernorm",
    "norm",
    "lm_head",
)
LAYER_KEYS = KEYS[1:9]  # 每个 decoder 层都有一份的那些


def _div_even(a: int, b: int, what: str, allow_replicate: bool = False) -> int:
    if allow_replicate and 0 < a < b:
        if b % a != 0:
            raise ValueError(f"{what}：{b} 个 rank 不能平均复制 {a} 个头")
        return 1
    if a % b != 0:
        raise ValueError(f"{what}：{a} 不能被 tp_size={b} 整除")
    return a // b


def rank_shapes(config: dict, tp_size: int) -> dict[str, tuple[int, ...] | None]:
    if not isinstance(tp_size, int) or tp_size <= 0:
        raise ValueError(f"tp_size 必须是正整数，现在是 {tp_size!r}")
    hidden = config["hidden_size"]
    inter = config["intermediate_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads  # 没写就是 MHA
    vocab = config["vocab_size"]
    head_dim = config.get("head_dim")
    if head_dim is None:
        if hidden % heads != 0:
            raise ValueError(f"没有 head_dim，而 hidden_size={hidden} 不能被 {heads} 个头整除")
        head_dim = hidden // heads

    local_q = _div_even(heads, tp_size, "num_attention_heads")
    local_kv = _div_even(kv_heads, tp_size, "num_key_value_heads", allow_replicate=True)
    local_inter = _div_even(inter, tp_size, "intermediate_size")
    vocab_per_rank = -(-vocab // tp_size)  # div_ceil：末尾的 rank 补零行
    qk_norm = (head_dim,) if config.get("model_type") == "qwen3" else None
    tied = bool(config.get("tie_word_embeddings", False))
    return {
        "embed_tokens": (vocab_per_rank, hidden),
        "qkv_proj": ((local_q + 2 * local_kv) * head_dim, hidden),
        "o_proj": (hidden, local_q * head_dim),
        "q_norm": qk_norm,
        "k_norm": qk_norm,
        "gate_up_proj": (2 * local_inter, hidden),
        "down_proj": (hidden, local_inter),
        "input_layernorm": (hidden,),
        "post_attention_layernorm": (hidden,),
        "norm": (hidden,),
        "lm_head": None if tied else (vocab_per_rank, hidden),
    }


def _numel(shape: tuple[int, ...] | None) -> int:
    if shape is None:
        return 0
    n = 1
    for d in shape:
        n *= d
    return n


def rank_param_count(config: dict, tp_size: int) -> int:
    shapes = rank_shapes(config, tp_size)
    per_layer = sum(_numel(shapes[k]) for k in LAYER_KEYS)
    once = sum(
        _numel(shapes[k]) for k in ("embed_tokens", "norm", "lm_head")
    )  # 绑定时 lm_head 是 None
    return config["num_hidden_layers"] * per_layer + once
