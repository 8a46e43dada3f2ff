"""第 3 章：模型与权重加载。

1. ModelConfig：SmolLM2、tiny Qwen3、Qwen3-0.6B 三份 config.json 读成同一份扁平配置；
2. 在 meta 设备上搭 Qwen3-0.6B，读出完整 / TP=2 / TP=16 时每个 rank 的权重形状（一个字节都不分配）；
3. 流式加载 SmolLM2 和 tiny Qwen3 的真权重，把 3 个长短不同的提示拼成一次 prefill，
   和 Hugging Face transformers 逐个比最后一个 token 的 logits；
4. 还没有 KV 缓存（第 4、5 章），贪心生成时每一步把整个前缀重新算一遍，结果和 HF 的 generate 逐 token 相同。

注意力后端在这里是一个十几行的"无缓存"版本，定义在本文件里。
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import torch
import torch.nn.functional as F
from minibook.hf import decode, encode, hf_greedy, hf_logits
from minibook.models import qwen3_06b_config, smollm2, tiny_qwen3

from minisgl.core import Batch, Context, Req, SamplingParams, set_global_ctx
from minisgl.distributed import set_tp_info
from minisgl.models import BaseLLMModel, ModelConfig, create_model, load_weight

CONFIG_FIELDS = [
    "architecture", "num_layers", "hidden_size", "intermediate_size", "num_qo_heads",
    "num_kv_heads", "head_dim", "vocab_size", "rms_norm_eps", "rope_theta",
    "max_position_embeddings", "tie_word_embeddings",
]


def width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(width(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  " + "  ".join(c + " " * (w - width(c)) for c, w in zip(row, widths)).rstrip())


# ---------------------------------------------------------------- 无缓存的注意力后端

class NoCacheAttention:
    """最朴素的注意力后端：每个请求只和本步自己的 token 做因果注意力，不存任何 K/V。

    所以只能处理"从头算"的请求（cached_len == 0）；要续写就得把整个前缀再送一遍。
    第 5 章的后端会把 K/V 存进 KV 池，decode 时只算新 token。
    """

    def forward(self, q, k, v, layer_id, batch):  # q: [T, Hq, d]，k/v: [T, Hkv, d]
        outs, start = [], 0
        group = q.shape[1] // k.shape[1]  # GQA：几个 q 头共用一个 KV 头
        for req in batch.reqs:
            assert req.cached_len == 0, "没有 KV 缓存，只能从头算"
            end = start + req.extend_len
            qi = q[start:end].transpose(0, 1)  # [头, token, d]
            ki = k[start:end].transpose(0, 1).repeat_interleave(group, dim=0)
            vi = v[start:end].transpose(0, 1).repeat_interleave(group, dim=0)
            o = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True)
            outs.append(o.transpose(0, 1))
            start = end
        return torch.cat(outs)


def make_req(uid: int, ids: list[int]) -> Req:
    return Req(input_ids=torch.tensor(ids, dtype=torch.int32), table_idx=uid, cached_len=0,
               output_len=1, uid=uid, sampling_params=SamplingParams(), cache_handle=None)


def prefill(model: BaseLLMModel, ctx: Context, prompts: list[list[int]]) -> torch.Tensor:
    """几个提示拼成一次 prefill，返回每个请求最后一个 token 的 logits [请求数, 词表]。"""
    reqs = [make_req(i, p) for i, p in enumerate(prompts)]
    batch = Batch(reqs=reqs, phase="prefill")
    batch.padded_reqs = reqs
    batch.input_ids = torch.cat([r.input_ids for r in reqs])  # 各请求的 token 首尾相接
    batch.positions = torch.cat([torch.arange(len(p), dtype=torch.int32) for p in prompts])
    with ctx.forward_batch(batch):
        return model.forward()


def greedy_no_cache(model: BaseLLMModel, ctx: Context, prompts: list[list[int]], n: int) -> list[list[int]]:
    """没有 KV 缓存的贪心生成：每一步把"提示 + 已生成"整个重新 prefill 一遍，取 argmax。"""
    seqs = [list(p) for p in prompts]
    for _ in range(n):
        next_ids = prefill(model, ctx, seqs).argmax(dim=-1).tolist()
        for seq, t in zip(seqs, next_ids):
            seq.append(t)
    return [seq[len(p):] for seq, p in zip(seqs, prompts)]


def load_model(path: Path) -> tuple[BaseLLMModel, list[tuple[str, torch.Size]]]:
    """先在 meta 设备上搭架子，再把 load_weight 流式交出的张量一个个换进去。"""
    config = ModelConfig.from_json(path)
    with torch.device("meta"):
        model = create_model(config)
    loaded = dict(load_weight(path, config))
    model.load_state_dict(loaded)
    return model, [(k, v.shape) for k, v in loaded.items()]


# ---------------------------------------------------------------- 一、配置

def section_configs() -> None:
    print("一、ModelConfig：三份 config.json 读成同样的字段")
    paths = {"SmolLM2-135M": smollm2(), "tiny-qwen3": tiny_qwen3(), "Qwen3-0.6B": qwen3_06b_config()}
    configs = {name: ModelConfig.from_json(p) for name, p in paths.items()}
    rows = [[f, *(getattr(c, f) for c in configs.values())] for f in CONFIG_FIELDS]
    print_table(["字段", *configs], rows)
    for c in configs.values():
        assert c.num_qo_heads % c.num_kv_heads == 0 and c.tie_word_embeddings
    q06 = configs["Qwen3-0.6B"]
    print(f"  Qwen3 的 q 头拼起来（{q06.num_qo_heads} × {q06.head_dim} = {q06.num_qo_heads * q06.head_dim}）"
          f"比 hidden_size（{q06.hidden_size}）宽，所以 head_dim 必须从 config.json 读，不能用 hidden / 头数")
    print()


# ---------------------------------------------------------------- 二、形状表

def rank_shapes(config: ModelConfig, tp: int) -> dict[str, tuple[int, ...]]:
    """rank 0 在 TP=tp 时的全部权重形状。模型建在 meta 设备上：只有形状，没有内存。"""
    set_tp_info(0, tp)
    try:
        with torch.device("meta"):
            model = create_model(config)
    finally:
        set_tp_info(0, 1)
    state = model.state_dict()
    assert all(t.is_meta for t in state.values())  # 一个字节的权重都没分配
    return {k: tuple(t.shape) for k, t in state.items()}


TP_SIZES = [1, 2, 16]


def qwen3_shape_table() -> str:
    """Qwen3-0.6B 每个 rank 的权重形状，Markdown 表格（解码层只列第 0 层，其余层一样）。"""
    config = ModelConfig.from_json(qwen3_06b_config())
    shapes = {tp: rank_shapes(config, tp) for tp in TP_SIZES}
    assert all(shapes[tp].keys() == shapes[1].keys() for tp in TP_SIZES)
    names = [k for k in shapes[1] if ".layers." not in k or ".layers.0." in k]
    head = ["权重", "完整（TP=1）", *(f"TP={tp} 每个 rank" for tp in TP_SIZES[1:])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        cells = [f"`{name}`", *(str(list(shapes[tp][name])) for tp in TP_SIZES)]
        lines.append("| " + " | ".join(cells) + " |")
    counts = {tp: sum(torch.Size(s).numel() for s in shapes[tp].values()) for tp in TP_SIZES}
    lines.append("| 参数量（全部 " + f"{config.num_layers} 层） | "
                 + " | ".join(f"{counts[tp] / 1e6:.1f} M" for tp in TP_SIZES) + " |")
    lines.append("| bf16 占用 | " + " | ".join(f"{counts[tp] * 2 / 2**20:.0f} MiB" for tp in TP_SIZES) + " |")
    return "\n".join(lines)


def section_shapes() -> None:
    print("二、Qwen3-0.6B 每个 rank 的权重形状（在 meta 设备上建模型，只读形状）")
    config = ModelConfig.from_json(qwen3_06b_config())
    table = qwen3_shape_table()
    print(table)
    s1, s2, s16 = (rank_shapes(config, tp) for tp in TP_SIZES)
    qkv = "model.layers.0.self_attn.qkv_proj.weight"
    d = config.head_dim
    assert s1[qkv][0] == (16 + 8 + 8) * d and s2[qkv][0] == (8 + 4 + 4) * d
    assert s16[qkv][0] == (1 + 1 + 1) * d  # 8 个 KV 头、16 个 rank：每个 rank 1 个（复制）
    assert "lm_head.weight" not in s1  # tie_word_embeddings：LM head 借用 embed_tokens
    total = {tp: sum(torch.Size(x).numel() for x in s.values()) for tp, s in zip(TP_SIZES, (s1, s2, s16))}
    # 每个 rank 都存完整一份的：每层 4 个归一化权重（两个 hidden 宽、q_norm/k_norm 各 head_dim 宽）+ 最后的 norm
    L, h = config.num_layers, config.hidden_size
    norms = L * (2 * h + 2 * d) + h
    assert total[2] * 2 == total[1] + norms
    # TP=16 还多出复制的 KV 头：k、v 各从 8 个头变成 16 个
    kv_copies = L * 2 * (16 - config.num_kv_heads) * d * h
    extra = total[16] * 16 - total[1]
    assert extra == 15 * norms + kv_copies
    kv = config.num_kv_heads
    print(f"  qkv_proj 在 TP=16 时每个 rank 是 (1 个 q 头 + 1 个 k 头 + 1 个 v 头) × {d} = {3 * d} 行："
          f"{kv} 个 KV 头不够 16 个 rank 分，每个头复制到 {16 // kv} 个 rank 上。")
    print("  lm_head 不在表里：tie_word_embeddings=True，LM head 直接用 embed_tokens 的权重。")
    print(f"  16 个 rank 的参数加起来比完整模型多 {extra / 1e6:.1f} M：复制的 KV 头 {kv_copies / 1e6:.1f} M，"
          f"每个 rank 各存一份的归一化权重 {15 * norms / 1e6:.1f} M。")
    print()


# ---------------------------------------------------------------- 三、四：真权重

PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "Once upon a time, there was a little"]
NEW_TOKENS = 8


def section_logits(ctx: Context) -> dict[str, BaseLLMModel]:
    print("三、流式加载真权重，3 个提示拼成一次 prefill，与 Hugging Face 对照")
    models = {}
    for path in (smollm2(), tiny_qwen3()):
        model, loaded = load_model(path)
        models[path.name] = model
        merged = [k for k, _ in loaded if k.endswith(("qkv_proj.weight", "gate_up_proj.weight"))]
        assert set(dict(loaded)) == set(model.state_dict())
        print(f"  {path.name}：load_weight 交出 {len(loaded)} 个张量（其中 {len(merged)} 个是合并出来的"
              f" qkv_proj / gate_up_proj），正好是模型 state_dict 的全部键")
        prompts = [encode(path, p) for p in PROMPTS]
        logits = prefill(model, ctx, prompts)
        lengths = [len(p) for p in prompts]
        print(f"    提示长度 {lengths}，拼成 {sum(lengths)} 个 token 的一批；logits 形状 {list(logits.shape)}"
              "（每个请求只留最后一个 token）")
        for i, ids in enumerate(prompts):
            ref = hf_logits(path, ids)[-1]
            diff = (logits[i] - ref).abs().max().item()
            assert diff < 1e-4 and logits[i].argmax() == ref.argmax()
        print("    每个请求最后一个 token 的 logits 与 HF 的 max |Δ| < 1e-4，argmax 相同")
    print()
    return models


def section_greedy(ctx: Context, models: dict[str, BaseLLMModel]) -> None:
    print(f"四、没有 KV 缓存的贪心生成：每步把整个前缀重算一遍，生成 {NEW_TOKENS} 个 token")
    for path in (smollm2(), tiny_qwen3()):
        prompts = [encode(path, p) for p in PROMPTS[:2]]
        ours = greedy_no_cache(models[path.name], ctx, prompts, NEW_TOKENS)
        for prompt, text, new in zip(prompts, PROMPTS, ours):
            assert new == hf_greedy(path, prompt, NEW_TOKENS)
            shown = repr(decode(path, new)) if path == smollm2() else str(new)
            print(f"  {path.name}  {text!r} → {shown}")
        print("    与 HF generate 的贪心结果逐 token 相同")
    print(f"  第 {NEW_TOKENS} 步要把整段前缀再算一遍：算量随长度平方增长。第 4、5 章的 KV 缓存解决它。")


def main() -> None:
    print("第 3 章：模型与权重加载\n")
    torch.set_num_threads(1)  # 几十个 token 的小批量：单线程就够快，和别的进程抢核时也不会被线程同步拖慢
    section_configs()
    section_shapes()
    ctx = Context(page_size=1)
    ctx.attn_backend = NoCacheAttention()
    set_global_ctx(ctx)
    models = section_logits(ctx)
    section_greedy(ctx, models)


if __name__ == "__main__":
    main()
