"""练习 011 的评测：真实配置（Qwen3-0.6B、SmolLM2-135M）和随机配置上，逐个权重比较形状，再比较参数量。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    CheckFailed,
    bad_int,
    probe_bad_arguments,
    check,
    check_equal,
    check_raises,
    check_type,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

KEYS = [
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
]

# Qwen3-0.6B 的 config.json 原样（一个事实，不是推出来的）
QWEN3_06B = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# SmolLM2-135M 的相关字段：没有 head_dim（576 / 9 = 64），9 个 query 头、3 个 KV 头
SMOLLM2_135M = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "num_hidden_layers": 30,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-05,
    "rope_theta": 100000,
}


# ---------------------------------------------------------------------------
# 参考实现：把一个 rank 的 state_dict 逐个列出来（名字、形状），头用 005 题的区间重叠法分配：
# 头 h 占 [h/H, (h+1)/H)，rank r 占 [r/T, (r+1)/T)，有重叠就是 r 的头。
# ---------------------------------------------------------------------------


def ref_heads(num_heads: int, tp: int, rank: int) -> list[int]:
    return [
        h
        for h in range(num_heads)
        if h * tp < (rank + 1) * num_heads and rank * num_heads < (h + 1) * tp
    ]


def ref_error(config: dict, tp: int) -> str | None:
    """分不了时返回原因，能分返回 None。"""
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    if tp <= 0:
        return f"tp_size={tp} 不是正整数"
    if config.get("head_dim") is None and config["hidden_size"] % heads:
        return f"没有 head_dim，hidden_size={config['hidden_size']} 不能被 {heads} 个头整除"
    if heads % tp:
        return f"{heads} 个 query 头不能平均分给 {tp} 个 rank"
    if not (kv % tp == 0 or tp % kv == 0):
        return f"{kv} 个 KV 头既不能平均分给 {tp} 个 rank，也不能平均复制"
    if config["intermediate_size"] % tp:
        return f"intermediate_size={config['intermediate_size']} 不能被 {tp} 整除"
    return None


def ref_state_dict(config: dict, tp: int, rank: int = 0) -> dict[str, tuple[int, ...]]:
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    vocab = config["vocab_size"]
    q_here = len(ref_heads(heads, tp, rank))
    kv_here = len(ref_heads(kv, tp, rank))
    inter_here = len([i for i in range(inter) if i * tp // inter == rank])
    vocab_rows = len(range(0, vocab, tp))  # 每隔 tp 个数一个 = ceil(vocab / tp)
    sd = {"model.embed_tokens.weight": (vocab_rows, hidden)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        sd[f"{p}.input_layernorm.weight"] = (hidden,)
        sd[f"{p}.self_attn.qkv_proj.weight"] = ((q_here + 2 * kv_here) * head_dim, hidden)
        sd[f"{p}.self_attn.o_proj.weight"] = (hidden, q_here * head_dim)
        if config.get("model_type") == "qwen3":
            sd[f"{p}.self_attn.q_norm.weight"] = (head_dim,)
            sd[f"{p}.self_attn.k_norm.weight"] = (head_dim,)
        sd[f"{p}.post_attention_layernorm.weight"] = (hidden,)
        sd[f"{p}.mlp.gate_up_proj.weight"] = (2 * inter_here, hidden)
        sd[f"{p}.mlp.down_proj.weight"] = (hidden, inter_here)
    sd["model.norm.weight"] = (hidden,)
    if not config.get("tie_word_embeddings", False):
        sd["lm_head.weight"] = (vocab_rows, hidden)
    return sd


def ref_shapes(config: dict, tp: int) -> dict[str, tuple[int, ...] | None]:
    sd = ref_state_dict(config, tp)
    out = {}
    for key in KEYS:
        found = [shape for name, shape in sd.items() if name.split(".")[-2] == key]
        out[key] = found[0] if found else None
    return out


def ref_count(config: dict, tp: int) -> int:
    return sum(math.prod(shape) for shape in ref_state_dict(config, tp).values())


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def describe(config: dict, tp: int) -> str:
    fields = [
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "num_hidden_layers",
        "tie_word_embeddings",
        "model_type",
    ]
    shown = ", ".join(f"{f}={config[f]!r}" for f in fields if f in config)
    return f"tp_size={tp}，config 里：{shown}"


def check_config(mod, config: dict, tp: int, title: str = "") -> None:
    context = (f"{title}：" if title else "") + describe(config, tp)
    why = ref_error(config, tp)
    if why is not None:
        check_raises(
            ValueError,
            mod.rank_shapes,
            config,
            tp,
            what=f"rank_shapes(config, {tp})（{why}；{context}）",
        )
        check_raises(
            ValueError,
            mod.rank_param_count,
            config,
            tp,
            what=f"rank_param_count(config, {tp})（{why}）",
        )
        return
    snapshot = dict(config)
    try:
        got = mod.rank_shapes(config, tp)
    except ValueError as e:
        raise CheckFailed(
            f"这个配置分得开，rank_shapes(config, {tp}) 却抛了 ValueError：{e}\n  输入：{context}"
            "\n  （KV 头比 rank 少时是复制，不是报错；词表除不尽时补零行，也不报错）"
        ) from None
    check(config == snapshot, f"rank_shapes 改动了传进来的 config，它应该只读\n  输入：{context}")
    check_type(got, dict, "rank_shapes(config, tp_size) 的返回值")
    missing = [k for k in KEYS if k not in got]
    extra = [k for k in got if k not in KEYS]
    check(
        not missing and not extra,
        "rank_shapes 返回的键不对"
        + (f"；少了 {missing}" if missing else "")
        + (f"；多了 {extra}" if extra else "")
        + f"\n  键应该正好是 {KEYS}",
    )
    want = ref_shapes(config, tp)
    for key in KEYS:
        value = got[key]
        what = f"rank_shapes(...)[{key!r}]"
        if value is not None:
            check_type(value, tuple, what)
            for d in value:
                check_type(d, int, f"{what} 里的元素")
        if value != want[key]:
            hint = ""
            if key == "lm_head" and want[key] is None:
                hint = "\n  tie_word_embeddings 为真：lm_head 和 embedding 共用一份权重，没有自己的形状（None）"
            elif key in ("q_norm", "k_norm"):
                hint = '\n  只有 model_type 为 "qwen3" 时才有 q_norm / k_norm（形状 (head_dim,)），否则是 None'
            try:
                check_equal(value, want[key], what, context)
            except CheckFailed as e:
                raise CheckFailed(f"{e}{hint}") from None
    try:
        count = mod.rank_param_count(config, tp)
    except ValueError as e:
        raise CheckFailed(
            f"这个配置分得开，rank_param_count(config, {tp}) 却抛了 ValueError：{e}\n  输入：{context}"
        ) from None
    check_type(count, int, "rank_param_count(config, tp_size) 的返回值")
    check_equal(count, ref_count(config, tp), f"rank_param_count(config, {tp})", context)


def random_config(rng: random.Random) -> dict:
    kv = rng.choice([1, 2, 3, 4, 8])
    heads = kv * rng.choice([1, 2, 3, 4])
    config = {
        "hidden_size": heads * rng.choice([8, 16, 32]) * rng.choice([1, 1, 2]),
        "intermediate_size": rng.choice([48, 64, 96, 120, 128, 256]),
        "num_attention_heads": heads,
        "num_hidden_layers": rng.randint(1, 6),
        "vocab_size": rng.randint(50, 500),
    }
    if rng.random() < 0.8:
        config["num_key_value_heads"] = kv
    if rng.random() < 0.4:
        config["head_dim"] = rng.choice([16, 32, 64])
    if rng.random() < 0.7:
        config["tie_word_embeddings"] = rng.random() < 0.5
    if rng.random() < 0.5:
        config["model_type"] = rng.choice(["qwen3", "llama"])
    if rng.random() < 0.1:  # 没有 head_dim、而 hidden 不能被头数整除：应该报错
        config.pop("head_dim", None)
        config["hidden_size"] = heads * 16 + 1
    return config


def check_bad_arguments(mod, rng: random.Random) -> None:
    """分不了的输入，rank_shapes 和 rank_param_count 都要抛 ValueError：配置和 tp_size 都随机，
    每次只坏一处。tp_size 就在边界上（0）一次、远一些一次；要整除的那几个数比 tp 的倍数多一个或者少一个；
    KV 头数随机挑一个既除不尽、也复制不了的。"""

    def shapes(config, tp_size):  # 按位置传参
        return mod.rank_shapes(config, tp_size)

    def count(config, tp_size):
        return mod.rank_param_count(config, tp_size)

    for _ in range(2):
        tp = rng.choice([2, 3, 4, 8])
        kv = rng.choice([tp * rng.randint(1, 3)] + [d for d in (1, 2, 4) if tp % d == 0])  # 能分或者能复制
        heads = math.lcm(kv, tp) * rng.randint(1, 2)
        head_dim = rng.choice([8, 16, 32])
        config = {
            "hidden_size": heads * head_dim,
            "intermediate_size": tp * rng.randint(2, 20),
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "num_hidden_layers": rng.randint(1, 4),
            "vocab_size": rng.randint(50, 500),
            "model_type": rng.choice(["qwen3", "llama"]),
        }
        assert ref_error(config, tp) is None

        def spoiled(**changes):  # 改过的字段排在最前面：判词里截短的 config 也看得见它；config 里没有 head_dim
            out = {**changes, **{k: v for k, v in config.items() if k not in changes}}
            assert ref_error(out, tp) is not None, out
            return out

        def near(r, step):  # step 的倍数多一个或者少一个（step >= 2，所以至少是 1）
            return step * r.randint(1, 4) + r.choice([1, -1])

        kinds = [
            ("tp_size", lambda r: 0), ("tp_size", lambda r: bad_int(r, 0)),  # 0 或负数
            # query 头数不能被 tp 整除（写明了 head_dim，只有这一处不对）
            ("config", lambda r: spoiled(num_attention_heads=near(r, tp), head_dim=head_dim)),
            # KV 头既不能被 tp 整除、tp 也不是它的整数倍
            ("config", lambda r: spoiled(num_key_value_heads=r.choice(
                [k for k in range(1, 4 * tp + 2) if k % tp and tp % k]))),
            ("config", lambda r: spoiled(intermediate_size=near(r, tp))),
            # 没有 head_dim，hidden_size 不能被头数整除
            ("config", lambda r: spoiled(hidden_size=near(r, heads))),
        ]
        good = dict(config=config, tp_size=tp)
        for key, spoil in kinds:
            probe_bad_arguments(shapes, good, {key: spoil}, rng, name="rank_shapes", tries=1)
            probe_bad_arguments(count, good, {key: spoil}, rng, name="rank_param_count", tries=1)


def run(mod: object) -> None:
    require(mod, "rank_shapes")
    require(mod, "rank_param_count")
    rng = random.Random(SEED)

    # 题目里的表：Qwen3-0.6B，TP=1、2、16（以及 4、8）
    for tp in (1, 2, 16, 4, 8):
        check_config(mod, QWEN3_06B, tp, "Qwen3-0.6B")
    count = mod.rank_param_count(QWEN3_06B, 1)
    check_equal(count, 596_049_920, "Qwen3-0.6B 在 TP=1 时的参数量（它的模型卡写的是 0.6B）")
    # SmolLM2-135M：TP=3 可以，TP=2 不行（9 个 query 头），TP=9 时中间维 1536 分不开
    for tp in (1, 3, 2, 9):
        check_config(mod, SMOLLM2_135M, tp, "SmolLM2-135M")
    # 不绑定的 Llama：有自己的 lm_head
    untied = dict(SMOLLM2_135M, tie_word_embeddings=False)
    check_config(mod, untied, 3, "SmolLM2-135M，假如不绑定 lm_head")
    # 没写 num_key_value_heads、也没写 tie_word_embeddings：MHA，不绑定
    bare = {
        k: v
        for k, v in SMOLLM2_135M.items()
        if k not in ("num_key_value_heads", "tie_word_embeddings")
    }
    check_config(mod, bare, 3, "没有 num_key_value_heads 和 tie_word_embeddings 的配置")
    # 词表除不尽：补零行，不报错
    check_config(mod, dict(QWEN3_06B, vocab_size=151937), 16, "词表 151937（除不尽）")
    check_bad_arguments(mod, random.Random(SEED + 1))

    for _ in range(150):
        config = random_config(rng)
        sizes = [1, 2, 3, 4, 8, 12, 16]
        heads = config["num_attention_heads"]
        splittable = [tp for tp in sizes if heads % tp == 0]  # 多给能分开的：KV 头常常要复制
        check_config(mod, config, rng.choice(splittable if rng.random() < 0.6 else sizes))


if __name__ == "__main__":
    main(run)
