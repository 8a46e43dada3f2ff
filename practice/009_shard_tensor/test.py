"""练习 009 的评测：真实的权重名、随机的 TP size / KV 头数 / 形状，每个 rank 都和独立的参考实现比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_tensor, main, probe_bad_arguments, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：不切片，而是给每一行（或列、或头）算出它的“主人”，再用布尔掩码挑出来。
# 头的主人用 005 题的区间重叠：头 h 占 [h/H, (h+1)/H)，rank r 占 [r/T, (r+1)/T)，
# 两段重叠就是 rank r 的头——切分和复制是同一条规则。
# ---------------------------------------------------------------------------


def ref_rule(key: str) -> str:
    module = key.split(".")[-2] if "." in key else ""
    for rule, modules in (
        ("dim0", ("q_proj", "gate_proj", "up_proj")),
        ("kv", ("k_proj", "v_proj")),
        ("dim1", ("o_proj", "down_proj")),
        ("vocab", ("embed_tokens", "lm_head")),
    ):
        if module in modules:
            return rule
    return "replicate"


def ref_even(value: torch.Tensor, dim: int, rank: int, size: int) -> torch.Tensor:
    n = value.shape[dim]
    mask = torch.tensor([i * size // n == rank for i in range(n)])
    return value.movedim(dim, 0)[mask].movedim(0, dim)


def ref_heads(num_heads: int, size: int, rank: int) -> list[int]:
    return [
        h
        for h in range(num_heads)
        if h * size < (rank + 1) * num_heads and rank * num_heads < (h + 1) * size
    ]


def ref_kv(value: torch.Tensor, rank: int, size: int, num_kv_heads: int) -> torch.Tensor:
    head_dim = value.shape[0] // num_kv_heads
    heads = ref_heads(num_kv_heads, size, rank)
    mask = torch.tensor([i // head_dim in heads for i in range(value.shape[0])])
    return value[mask]


def ref_vocab(value: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    vocab = value.shape[0]
    per = (vocab + size - 1) // size
    padded = torch.zeros((per * size, *value.shape[1:]), dtype=value.dtype)
    padded[:vocab] = value
    return padded.reshape(size, per, *value.shape[1:])[rank]


def ref_shard(key, value, rank, size, num_kv_heads) -> torch.Tensor:
    rule = ref_rule(key)
    if rule == "dim0":
        return ref_even(value, 0, rank, size)
    if rule == "kv":
        return ref_kv(value, rank, size, num_kv_heads)
    if rule == "dim1":
        return ref_even(value, 1, rank, size)
    if rule == "vocab":
        return ref_vocab(value, rank, size)
    return value


RULE_TEXT = {
    "dim0": "第 0 维均分",
    "kv": "第 0 维按 KV 头分（头不够时复制）",
    "dim1": "第 1 维均分",
    "vocab": "按词表分、末尾补零行",
    "replicate": "不切、原样返回",
}


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def guess(got: torch.Tensor, key, value, rank, size, num_kv_heads) -> str:
    """结果不对时，看看它是不是恰好等于按别的规则切出来的。"""
    rule = ref_rule(key)
    candidates = []
    if value.dim() == 2:
        candidates.append(
            ("dim1", ref_even(value, 1, rank, size) if value.shape[1] % size == 0 else None)
        )
    if value.shape[0] % size == 0:
        candidates.append(("dim0", ref_even(value, 0, rank, size)))
    candidates.append(("replicate", value))
    if rule == "kv" and num_kv_heads < size:
        # 复制时常见的错：rank r 拿了头 r % num_kv_heads
        head_dim = value.shape[0] // num_kv_heads
        h = rank % num_kv_heads
        candidates.append(("kv_modulo", value[h * head_dim : (h + 1) * head_dim]))
    if rule == "vocab":
        vocab = value.shape[0]
        per = (vocab + size - 1) // size
        candidates.append(
            ("vocab_nopad", value[min(rank * per, vocab) : min((rank + 1) * per, vocab)])
        )
    for name, alt in candidates:
        if alt is None or name == rule or tuple(alt.shape) != tuple(got.shape):
            continue
        if torch.equal(got, alt):
            if name == "kv_modulo":
                return (
                    f"\n  看起来你让 rank {rank} 拿了第 {rank} % {num_kv_heads} 个头；复制时相邻的 "
                    f"{size // num_kv_heads} 个 rank 共用一个头，rank r 拿第 r // {size // num_kv_heads} 个"
                )
            if name == "vocab_nopad":
                return "\n  看起来你没有补零行：每个 rank 都要凑满 div_ceil(vocab, size) 行"
            return (
                f"\n  你的结果像是“{RULE_TEXT[name]}”；{key.split('.')[-2]} 应该{RULE_TEXT[rule]}"
            )
    return ""


def check_owns_memory(got: torch.Tensor, value: torch.Tensor, call: str) -> None:
    """切出来的一块要是独立的内存：不是 value 的视图，也不是别的大张量的视图。"""
    storage = got.untyped_storage()
    check(
        storage.data_ptr() != value.untyped_storage().data_ptr(),
        f"{call} 的返回值和传进来的 value 共用同一块内存：它是 value 的一个视图（view）。\n"
        "  切片哪怕已经连续（按行切的一段就是），也只是完整张量的视图：交出去以后，完整张量的存储"
        "（从文件读出的整段数据）就跟着它一直活着。要拷成一块独立的内存，例如 .clone()",
    )
    need = got.numel() * got.element_size()
    check(
        storage.nbytes() == need,
        f"{call} 的返回值只有 {need} 字节，底下的存储却有 {storage.nbytes()} 字节："
        "它是某个更大张量的视图。切完再拷一份（.clone()），交出去的权重只占自己那么大",
    )


def check_one(shard_tensor, key: str, value: torch.Tensor, size: int, num_kv_heads: int) -> None:
    original = value.clone()
    rule = ref_rule(key)
    for rank in range(size):
        call = (
            f"shard_tensor({key!r}, value{tuple(value.shape)} {value.dtype}, rank={rank}, "
            f"size={size}, num_kv_heads={num_kv_heads})"
        )
        try:
            got = shard_tensor(key, value, rank, size, num_kv_heads)
        except ValueError as e:
            raise CheckFailed(
                f"{call} 应该切得开（规则：{RULE_TEXT[rule]}），你的代码却抛了 ValueError：{e}"
            ) from None
        want = ref_shard(key, value, rank, size, num_kv_heads)
        try:
            check_tensor(got, f"{call} 的返回值", shape=tuple(want.shape), dtype=value.dtype)
        except CheckFailed as e:
            extra = (
                guess(got, key, value, rank, size, num_kv_heads)
                if isinstance(got, torch.Tensor)
                else ""
            )
            raise CheckFailed(f"{e}\n  规则：{RULE_TEXT[rule]}{extra}") from None
        check(
            got.is_contiguous(),
            f"{call} 的返回值应该是连续（contiguous）的张量（切完调一次 .contiguous()）",
        )
        if rule != "replicate":
            check_owns_memory(got, value, call)
        if not torch.equal(got, want):
            diff = (got != want).reshape(got.shape[0], -1).any(dim=1).nonzero()
            where = f"，第一处不同在第 {int(diff[0])} 行" if len(diff) else ""
            check(
                False,
                f"{call} 的数值不对{where}\n  规则：{RULE_TEXT[rule]}"
                + guess(got, key, value, rank, size, num_kv_heads),
            )
        check(torch.equal(value, original), f"{call} 改动了传进来的 value，它应该只读")


def rand(gen: torch.Generator, shape, dtype) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * 3).to(dtype)


def layer_weights(cfg: dict, layer: int, bias: bool) -> list[tuple[str, tuple[int, ...]]]:
    hidden, heads, kv, hd, inter = (
        cfg["hidden"],
        cfg["heads"],
        cfg["kv"],
        cfg["head_dim"],
        cfg["inter"],
    )
    p = f"model.layers.{layer}"
    names = [
        (f"{p}.input_layernorm.weight", (hidden,)),
        (f"{p}.self_attn.q_proj.weight", (heads * hd, hidden)),
        (f"{p}.self_attn.k_proj.weight", (kv * hd, hidden)),
        (f"{p}.self_attn.v_proj.weight", (kv * hd, hidden)),
        (f"{p}.self_attn.o_proj.weight", (hidden, heads * hd)),
        (f"{p}.self_attn.q_norm.weight", (hd,)),
        (f"{p}.self_attn.k_norm.weight", (hd,)),
        (f"{p}.post_attention_layernorm.weight", (hidden,)),
        (f"{p}.mlp.gate_proj.weight", (inter, hidden)),
        (f"{p}.mlp.up_proj.weight", (inter, hidden)),
        (f"{p}.mlp.down_proj.weight", (hidden, inter)),
    ]
    if bias:  # Qwen2 的 q/k/v 有 bias
        names += [
            (f"{p}.self_attn.q_proj.bias", (heads * hd,)),
            (f"{p}.self_attn.k_proj.bias", (kv * hd,)),
            (f"{p}.self_attn.v_proj.bias", (kv * hd,)),
        ]
    return names


def random_config(rng: random.Random) -> tuple[dict, int]:
    size = rng.choice([1, 2, 4, 8, 16])
    kv = rng.choice([k for k in (1, 2, 3, 4, 6, 8, 16) if k % size == 0 or size % k == 0])
    group = rng.choice([1, 2, 3])
    heads = kv * group
    while heads % size:
        heads += kv
    cfg = {
        "hidden": rng.choice([4, 8, 12, 16]),
        "heads": heads,
        "kv": kv,
        "head_dim": rng.choice([2, 4, 8]),
        "inter": size * rng.randint(1, 4),
        "vocab": rng.randint(1, 60),
    }
    return cfg, size


def check_bad_arguments(shard_tensor, rng: random.Random) -> None:
    """坏参数：TP size、层号、权重的大小都随机；除不尽的那一维差得随机；rank 就在边界外一点或者远一些。"""

    def call(key, value, rank, size, num_kv_heads):  # 按位置传参
        return shard_tensor(key, value, rank, size, num_kv_heads)

    def not_multiple(r, size, at_least=1):  # 一个不是 size 倍数的数（>= at_least）
        return size * r.randint(at_least, 20) + r.randint(1, size - 1)

    for _ in range(2):
        size = rng.choice([2, 3, 4, 8])
        layer = rng.randint(0, 40)
        rank = rng.randrange(size)
        name = lambda module, kind: f"model.layers.{layer}.{kind}.{module}.weight"  # noqa: E731
        per = rng.randint(1, 4)
        # 行数是 60 * head_dim：60 能被好几种头数整除，坏的头数就不会先撞上“行数分不成这么多头”
        head_dim = rng.randint(1, 3)
        kv_rows = 60 * head_dim
        good_heads = [h for h in (2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60) if h % size == 0 or size % h == 0]
        bad_heads = [h for h in (3, 4, 5, 6, 10, 12, 15, 20, 30, 60) if h % size and size % h]
        num_kv_heads = rng.choice(good_heads)
        dim0 = name(rng.choice(["q_proj", "gate_proj", "up_proj"]), "self_attn")
        dim1 = name(rng.choice(["o_proj", "down_proj"]), "mlp")
        kv = name(rng.choice(["k_proj", "v_proj"]), "self_attn")
        cases = [
            # (权重名, 好的 value, 坏的是哪个参数, 坏值)
            (dim0, torch.zeros(size * per, 3), "value", lambda r: torch.zeros(not_multiple(r, size), 3)),
            (dim1, torch.zeros(3, size * per), "value", lambda r: torch.zeros(3, not_multiple(r, size))),
            # 行并行的权重不是二维的：一维的、三维的（第 1 维照样除得尽，只有维数不对）
            (dim1, torch.zeros(3, size * per), "value", lambda r: torch.zeros(size * r.randint(1, 20))),
            (dim1, torch.zeros(3, size * per), "value",
             lambda r: torch.zeros(r.randint(1, 4), size * r.randint(1, 8), size * r.randint(1, 8))),
            (kv, torch.zeros(kv_rows, 2), "value",  # 行数分不成 num_kv_heads 个头
             lambda r: torch.zeros(num_kv_heads * r.randint(1, 20) + r.randint(1, num_kv_heads - 1), 2)),
            (kv, torch.zeros(kv_rows, 2), "num_kv_heads", lambda r: r.choice(bad_heads)),  # 既分不了、也复制不了
            (rng.choice([dim0, dim1, kv, "model.norm.weight"]), None, "rank",
             lambda r: r.choice([size, size + r.randint(1, 1000), -1, -r.randint(2, 1000)])),
            (rng.choice([dim0, "model.norm.weight"]), None, "size", lambda r: r.choice([0, -r.randint(1, 64)])),
        ]
        for key, value, what, spoil in cases:
            if value is None:  # 只有 rank / size 是坏的：value 随便给一个这个名字能切的
                value = torch.zeros(kv_rows, 2) if key == kv else torch.zeros(size * per, size * per)
            good = dict(key=key, value=value, rank=rank, size=size, num_kv_heads=num_kv_heads)
            probe_bad_arguments(call, good, {what: spoil}, rng, name="shard_tensor", tries=1)


def run(mod: object) -> None:
    shard_tensor = require(mod, "shard_tensor")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    # ---- 先一个一个规则地看（能看清的数：第 i 行就是 i）
    rows = torch.arange(16, dtype=torch.float32).reshape(16, 1).repeat(1, 3)
    check_one(shard_tensor, "model.layers.0.self_attn.q_proj.weight", rows, 4, 2)
    check_one(
        shard_tensor, "model.layers.0.self_attn.k_proj.weight", rows, 2, 4
    )  # 4 个头分给 2 个 rank
    check_one(
        shard_tensor, "model.layers.0.self_attn.v_proj.weight", rows, 8, 2
    )  # 2 个头复制给 8 个 rank
    check_one(shard_tensor, "model.layers.0.mlp.down_proj.weight", rows.T.contiguous(), 4, 2)
    check_one(
        shard_tensor, "model.embed_tokens.weight", torch.arange(10.0).reshape(10, 1), 4, 1
    )  # 题目的例子
    check_one(
        shard_tensor, "lm_head.weight", torch.arange(5.0).reshape(5, 1).repeat(1, 2), 4, 1
    )  # rank 3 全是零
    for key in (
        "model.norm.weight",
        "model.layers.3.self_attn.q_norm.weight",
        "model.layers.3.input_layernorm.weight",
    ):
        check_one(shard_tensor, key, torch.randn(8, generator=gen), 4, 2)
    check_one(
        shard_tensor,
        "model.layers.0.self_attn.rotary_emb.inv_freq",
        torch.rand(4, generator=gen),
        2,
        2,
    )

    # ---- 随机的模型和 TP size：一整层的权重，加上 embedding 和 lm_head
    for _ in range(40):
        cfg, size = random_config(rng)
        dtype = rng.choice([torch.float32, torch.bfloat16, torch.float16])
        names = layer_weights(cfg, rng.randrange(40), bias=rng.random() < 0.3)
        names += [
            ("model.embed_tokens.weight", (cfg["vocab"], cfg["hidden"])),
            ("lm_head.weight", (cfg["vocab"], cfg["hidden"])),
            ("model.norm.weight", (cfg["hidden"],)),
        ]
        for key, shape in names:
            check_one(shard_tensor, key, rand(gen, shape, dtype), size, cfg["kv"])

    # ---- 出错的输入
    check_bad_arguments(shard_tensor, random.Random(SEED + 1))

if __name__ == "__main__":
    main(run)
