"""第 2 章：算子层。

分两半走一遍本章的层：

1. 单卡（tp=1）：按 SmolLM2 的 config.json 在 meta 设备上搭出一个解码层要用的全部层，
   看权重的名字和形状，再换上真权重，让 5 个 token 流过这一层；
2. 张量并行（TP=2）：不开多进程，在一个进程里用两个线程扮演两个 rank。建每个 rank 的层之前
   先 set_tp_info(rank, 2)，权重从一份完整的随机权重里按切法切出来，集合通信由一个
   线程之间交换张量的假插件完成。看每个 rank 存什么、算出什么，以及拼起来、加起来是否等于单卡。

每个结论都用 assert 检查；随机数种子固定，输出每次都一样。
"""

from __future__ import annotations

import json
import threading
import unicodedata

import torch
import torch.nn.functional as F
from minibook.models import smollm2

from minisgl.core import Batch, Context, Req, SamplingParams, set_global_ctx
from minisgl.distributed import DistributedCommunicator, DistributedImpl, get_tp_info, set_tp_info
from minisgl.layers import (
    AttentionLayer,
    BaseOP,
    LinearColParallelMerged,
    LinearOProj,
    LinearQKVMerged,
    LinearRowParallel,
    ParallelLMHead,
    RMSNormFused,
    VocabParallelEmbedding,
    get_rope,
    silu_and_mul,
)
from minisgl.utils import div_even


# ---------------------------------------------------------------- 公共的小工具

def shape(t: torch.Tensor) -> str:
    return str(list(t.shape))


def pad(text: str, n: int) -> str:
    """补空格到 n 列宽（一个汉字占两列），让表格对齐。"""
    w = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(n - w, 1)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def rope_theta(cfg: dict) -> float:
    """transformers 4 把 rope_theta 写在顶层，transformers 5 写进 rope_parameters；两种都认。"""
    return float((cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta", 10000.0))


def make_batch(lengths: list[int], phase: str = "prefill") -> Batch:
    """几个请求、各自这一步要算的 token 数；token id 和位置在这一章里不重要，随便填。"""
    reqs = [
        Req(input_ids=torch.arange(n, dtype=torch.int32), table_idx=i, cached_len=0, output_len=1,
            uid=i, sampling_params=SamplingParams(), cache_handle=None)
        for i, n in enumerate(lengths)
    ]
    batch = Batch(reqs=reqs, phase=phase)
    batch.padded_reqs = reqs
    batch.positions = torch.cat([torch.arange(n, dtype=torch.int32) for n in lengths])
    batch.input_ids = torch.cat([r.input_ids for r in reqs])
    return batch


class CausalAttention:
    """最朴素的注意力"后端"：每个请求只和本步自己的 token 做因果注意力，没有 KV 缓存。

    真正的后端（第 5 章）要读写 KV 池；这里只为了让层能跑起来。
    """

    def forward(self, q, k, v, layer_id, batch):
        outs, start = [], 0
        group = q.shape[1] // k.shape[1]  # GQA：几个 q 头共用一个 KV 头
        for req in batch.reqs:
            end = start + req.extend_len
            qi = q[start:end].transpose(0, 1)  # [头, token, head_dim]
            ki = k[start:end].transpose(0, 1).repeat_interleave(group, dim=0)
            vi = v[start:end].transpose(0, 1).repeat_interleave(group, dim=0)
            outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=True).transpose(0, 1))
            start = end
        return torch.cat(outs)


# ---------------------------------------------------------------- 一、二：单卡

class LlamaBlock(BaseOP):
    """一个 Llama 解码层要用的全部层。属性名就是权重名；第 3 章的 LlamaDecoderLayer 也这样拼。"""

    def __init__(self, cfg: dict) -> None:
        h, d = cfg["hidden_size"], cfg["head_dim"]
        nq, nkv, inter = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
        self.input_layernorm = RMSNormFused(h, cfg["rms_norm_eps"])
        self.qkv_proj = LinearQKVMerged(h, d, nq, nkv)
        self.o_proj = LinearOProj(nq * d, h)
        self.post_attention_layernorm = RMSNormFused(h, cfg["rms_norm_eps"])
        self.gate_up_proj = LinearColParallelMerged(h, [inter, inter])
        self.down_proj = LinearRowParallel(inter, h)
        # 下划线开头：不是权重，state_dict 里没有它（RoPE 的 cos/sin 表是算出来的）
        rope = get_rope(d, d, cfg["max_position_embeddings"], rope_theta(cfg))
        self._attn = AttentionLayer(0, nq, nkv, d, rope)

    def forward(self, x, residual, trace):
        x, residual = self.input_layernorm.forward(x, residual)
        trace.append(("input_layernorm", x, "残差 = 输入 x"))
        qkv = self.qkv_proj.forward(x)
        trace.append(("qkv_proj", qkv, "q、k、v 三段拼在一起"))
        o = self._attn.forward(qkv)
        trace.append(("注意力（切头、RoPE、后端）", o, "每个 q 头一份输出"))
        x = self.o_proj.forward(o)
        trace.append(("o_proj", x, ""))
        x, residual = self.post_attention_layernorm.forward(x, residual)
        trace.append(("post_attention_layernorm", x, "残差 = 输入 + 注意力输出"))
        gate_up = self.gate_up_proj.forward(x)
        trace.append(("gate_up_proj", gate_up, "gate、up 两段拼在一起"))
        act = silu_and_mul(gate_up)
        trace.append(("silu_and_mul", act, "silu(gate) * up"))
        x = self.down_proj.forward(act)
        trace.append(("down_proj", x, ""))
        return x, residual


def section_one_rank(cfg: dict) -> LlamaBlock:
    print("一、单卡：SmolLM2 一个解码层的权重（尺寸从 config.json 读，层建在 meta 设备上）")
    nq, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    print(f"  hidden_size={h}，{nq} 个 q 头、{nkv} 个 KV 头、head_dim={d}，"
          f"intermediate_size={inter}，词表 {cfg['vocab_size']}")
    with torch.device("meta"):  # 只记形状、不分配内存：真模型几个 GB 也是一瞬间
        block = LlamaBlock(cfg)
        embed = VocabParallelEmbedding(cfg["vocab_size"], h)
    state = block.state_dict()
    for name, w in [("embed_tokens.weight", embed.weight), *state.items()]:
        print(f"  {name:34s}{shape(w):14s}{w.device}")
    assert list(state) == ["input_layernorm.weight", "qkv_proj.weight", "o_proj.weight",
                           "post_attention_layernorm.weight", "gate_up_proj.weight",
                           "down_proj.weight"]
    assert state["qkv_proj.weight"].shape == ((nq + 2 * nkv) * d, h)
    assert state["gate_up_proj.weight"].shape == (2 * inter, h)
    assert state["down_proj.weight"].shape == (h, inter)
    print(f"  qkv_proj 的 {(nq + 2 * nkv) * d} 行 = ({nq} 个 q 头 + {nkv} 个 k 头 + {nkv} 个 v 头) × {d}；"
          f"gate_up_proj 的 {2 * inter} 行 = gate {inter} 行 + up {inter} 行")

    gen = torch.Generator().manual_seed(0)
    real = {k: torch.randn(v.shape, generator=gen) * 0.05 for k, v in state.items()}
    for k in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        real[k] = torch.ones(h)  # 归一化层的权重通常在 1 附近
    block.load_state_dict(real)
    assert all(block.state_dict()[k] is real[k] for k in real)  # 换进去的就是那个张量本身
    print(f"  load_state_dict 之后：qkv_proj.weight 在 {block.qkv_proj.weight.device} 上——"
          "权重是整个换掉的，不是往 meta 张量里拷贝")
    try:
        block.load_state_dict({**real, "o_proj.weight": torch.zeros(3, 3)})
    except ValueError as e:
        print(f"  形状不对时：{e}")
    try:
        div_even(nq, 2)
    except ValueError as e:
        print(f"  SmolLM2 能不能切成 TP=2？{nq} 个 q 头：{e}")
    print(f"  TP=3 倒是可以：每个 rank {div_even(nq, 3)} 个 q 头、{div_even(nkv, 3)} 个 KV 头")
    print()
    return block


def section_forward(block: LlamaBlock, cfg: dict, ctx: Context) -> None:
    print("二、一步前向：一个请求的 5 个 token 流过这一层（随机权重，只看形状）")
    h, d = cfg["hidden_size"], cfg["head_dim"]
    batch = make_batch([5])
    x = torch.randn(5, h, generator=torch.Generator().manual_seed(1))
    trace: list = []
    with ctx.forward_batch(batch):
        out, residual = block.forward(x, None, trace)
    print(f"  {pad('输入 x', 30)}{shape(x)}")
    for name, t, note in trace:
        print(f"  {pad(name, 30)}{pad(shape(t), 12)}{note}".rstrip())
    shapes = {name: tuple(t.shape) for name, t, _ in trace}
    assert shapes["qkv_proj"] == (5, (cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) * d)
    assert shapes["silu_and_mul"] == (5, cfg["intermediate_size"]) and out.shape == x.shape
    # RMSNormFused 把残差加法并了进来：第二次归一化前的残差 = x + o_proj 的输出
    assert max_diff(residual, x + trace[3][1]) == 0
    print("  第二个残差确实是 x + o_proj 的输出：RMSNormFused 把“加残差”并进了归一化")

    # RoPE：q·k 只取决于两个位置的差
    rope = get_rope(d, d, cfg["max_position_embeddings"], rope_theta(cfg))
    q, k = torch.randn(2, 1, 1, d, generator=torch.Generator().manual_seed(2))
    dots = []
    for pq, pk in [(3, 1), (10, 8), (100, 98)]:
        rq, _ = rope.forward(torch.tensor([pq]), q, k)
        _, rk = rope.forward(torch.tensor([pk]), q, k)
        dots.append((rq * rk).sum().item())
    print(f"  RoPE：q 在位置 3/10/100、k 在位置 1/8/98（都差 2），q·k = "
          f"{'、'.join(f'{v:.3f}' for v in dots)}——只看相对距离")
    assert max(dots) - min(dots) < 1e-3
    print()


# ---------------------------------------------------------------- 三～六：模拟两个 rank

class ThreadComm(DistributedImpl):
    """单进程模拟 TP 的通信插件：每个 rank 一个线程，集合通信时在栅栏处等齐所有 rank。

    真实的 TP 是几个进程，通信走 NCCL/gloo（第 16 章）；层只认 DistributedCommunicator，
    所以把这个插件放进 plugins，层的代码一行不改就能在线程之间"通信"。
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size)
        self._slots: list = [None] * size
        self._me = threading.local()
        self.sent: list[list[tuple[str, torch.Tensor]]] = [[] for _ in range(size)]  # 各 rank 交出去的

    def _exchange(self, op: str, x: torch.Tensor) -> list[torch.Tensor]:
        rank = self._me.rank
        self.sent[rank].append((op, x))
        self._slots[rank] = x
        self._barrier.wait()  # 等齐：每个 rank 都交了自己那份
        parts = list(self._slots)
        self._barrier.wait()  # 再等齐：每个 rank 都取走了，槽位才能给下一次通信用
        return parts

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack(self._exchange("all_reduce", x)).sum(dim=0)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(self._exchange("all_gather", x), dim=0)

    def run(self, fn):
        """在 size 个线程里各跑一次 fn(rank)，按 rank 顺序返回结果。"""
        results: list = [None] * self.size
        errors: list[BaseException] = []

        def worker(rank: int) -> None:
            self._me.rank = rank
            try:
                results[rank] = fn(rank)
            except BaseException as e:  # 一个 rank 出错，让别的 rank 别在栅栏前干等
                errors.append(e)
                self._barrier.abort()

        threads = [threading.Thread(target=worker, args=(r,)) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        return results


# 一个玩具尺寸的模型：4 个 q 头、2 个 KV 头，词表 11（故意不能被 2 整除）
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 16, 4, 2, 4, 24, 11
TP = 2


def rows(w: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """按第 0 维（输出维）均分，取第 rank 段。"""
    n = div_even(w.shape[0], size)
    return w[rank * n : (rank + 1) * n]


def cols(w: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """按第 1 维（输入维）均分，取第 rank 段。"""
    n = div_even(w.shape[1], size)
    return w[:, rank * n : (rank + 1) * n]


def vocab_rows(w: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """词表切法：每段 ceil(V / size) 行，最后一段不够就补零行。"""
    per = -(-w.shape[0] // size)
    piece = w[rank * per : (rank + 1) * per]
    return torch.cat([piece, w.new_zeros(per - piece.shape[0], w.shape[1])])


def full_weights() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(42)
    return {
        "q": torch.randn(HEADS * HEAD_DIM, HIDDEN, generator=gen),
        "k": torch.randn(KV_HEADS * HEAD_DIM, HIDDEN, generator=gen),
        "v": torch.randn(KV_HEADS * HEAD_DIM, HIDDEN, generator=gen),
        "gate": torch.randn(INTER, HIDDEN, generator=gen),
        "up": torch.randn(INTER, HIDDEN, generator=gen),
        "down": torch.randn(HIDDEN, INTER, generator=gen),
        "embed": torch.randn(VOCAB, HIDDEN, generator=gen),
    }


class RankLayers:
    """一个 rank 手里的层，权重已换成切好的那一份。"""

    def __init__(self, rank: int, size: int, w: dict[str, torch.Tensor]) -> None:
        set_tp_info(rank, size)  # 层在 __init__ 里读它，决定只分配多大的本地权重
        self.qkv = LinearQKVMerged(HIDDEN, HEAD_DIM, HEADS, KV_HEADS)
        self.qkv.load_state_dict({"weight": torch.cat(
            [rows(w["q"], rank, size), rows(w["k"], rank, size), rows(w["v"], rank, size)])})
        self.gate_up = LinearColParallelMerged(HIDDEN, [INTER, INTER])
        self.gate_up.load_state_dict({"weight": torch.cat(
            [rows(w["gate"], rank, size), rows(w["up"], rank, size)])})
        self.down = LinearRowParallel(INTER, HIDDEN)
        self.down.load_state_dict({"weight": cols(w["down"], rank, size)})
        self.embed = VocabParallelEmbedding(VOCAB, HIDDEN)
        self.embed.load_state_dict({"weight": vocab_rows(w["embed"], rank, size)})
        self.lm_head = ParallelLMHead(VOCAB, HIDDEN, tied_embedding=self.embed)


def section_shards(w: dict[str, torch.Tensor]) -> list[RankLayers]:
    print(f"三、两个 rank 各存什么（玩具尺寸：hidden={HIDDEN}，{HEADS} 个 q 头、{KV_HEADS} 个 KV 头、"
          f"head_dim={HEAD_DIM}，intermediate={INTER}，词表 {VOCAB}）")
    ranks = [RankLayers(r, TP, w) for r in range(TP)]
    table = [
        ("qkv_proj", torch.cat([w["q"], w["k"], w["v"]]), lambda L: L.qkv.weight, "按头切输出（列并行）"),
        ("gate_up_proj", torch.cat([w["gate"], w["up"]]), lambda L: L.gate_up.weight,
         "gate、up 各切一半再拼（列并行）"),
        ("down_proj", w["down"], lambda L: L.down.weight, "按输入维切（行并行）"),
        ("embed_tokens", w["embed"], lambda L: L.embed.weight, "按词表切，rank 1 末尾补 1 行零"),
    ]
    print(f"  {pad('层', 14)}{pad('完整权重', 10)}{pad('rank 0', 10)}{pad('rank 1', 10)}切法")
    for name, full, get, how in table:
        print(f"  {pad(name, 14)}{pad(shape(full), 10)}{pad(shape(get(ranks[0])), 10)}"
              f"{pad(shape(get(ranks[1])), 10)}{how}")
    assert ranks[0].qkv.weight.shape == ranks[1].qkv.weight.shape == ((HEADS + 2 * KV_HEADS) * HEAD_DIM // TP, HIDDEN)
    assert ranks[1].down.weight.shape == (HIDDEN, INTER // TP)
    per = -(-VOCAB // TP)
    assert ranks[1].embed.weight.shape == (per, HIDDEN) and ranks[1].embed.weight[-1].abs().sum() == 0
    set_tp_info(0, 1)
    print()
    return ranks


def section_column(w, ranks: list[RankLayers], comm: ThreadComm, x: torch.Tensor) -> None:
    print("四、列并行：各 rank 算出输出的一段，不用通信")
    full_q, full_k, full_v = (x @ w[n].T for n in "qkv")
    outs = comm.run(lambda r: ranks[r].qkv.forward(x))
    qd, kvd = HEADS * HEAD_DIM // TP, KV_HEADS * HEAD_DIM // TP
    print(f"  qkv_proj：完整输出 q{shape(full_q)} k{shape(full_k)} v{shape(full_v)}；"
          f"每个 rank 输出 {shape(outs[0])} = 自己的 {HEADS // TP} 个 q 头 + {KV_HEADS // TP} 个 k 头 + "
          f"{KV_HEADS // TP} 个 v 头")
    naive = torch.cat(outs, dim=-1)
    full_qkv = torch.cat([full_q, full_k, full_v], dim=-1)
    print(f"    把两个 rank 的输出直接首尾相接：与完整的 [q|k|v] 差 max |Δ| = {max_diff(naive, full_qkv):.2f}（顺序不对）")
    parts = [o.split([qd, kvd, kvd], dim=-1) for o in outs]
    for i, full in enumerate((full_q, full_k, full_v)):
        joined = torch.cat([p[i] for p in parts], dim=-1)
        assert max_diff(joined, full) < 1e-5
    assert max_diff(naive, full_qkv) > 0.1
    print("    先按 q、k、v 分段，再把各 rank 的同一段拼起来：三段都与完整输出一致（max |Δ| < 1e-5）")

    outs = comm.run(lambda r: ranks[r].gate_up.forward(x))
    full_gate, full_up = x @ w["gate"].T, x @ w["up"].T
    acts = [silu_and_mul(o) for o in outs]
    full_act = silu_and_mul(torch.cat([full_gate, full_up], dim=-1))
    half = INTER // TP
    for r in range(TP):
        gate_r, up_r = outs[r].split([half, half], dim=-1)
        assert max_diff(gate_r, full_gate[:, r * half : (r + 1) * half]) < 1e-5
        assert max_diff(up_r, full_up[:, r * half : (r + 1) * half]) < 1e-5
        assert max_diff(acts[r], full_act[:, r * half : (r + 1) * half]) < 1e-5
    print(f"  gate_up_proj：每个 rank 输出 {shape(outs[0])} = gate 的第 r 段 + up 的第 r 段；"
          f"silu_and_mul 之后 {shape(acts[0])}")
    print(f"    正好是完整激活 {shape(full_act)} 的第 r 段列——行并行的 down_proj 要的就是这个输入")
    print()


def section_row(w, ranks: list[RankLayers], comm: ThreadComm, x: torch.Tensor) -> None:
    print("五、行并行：各 rank 算出部分和，all_reduce 加起来")
    full_h = silu_and_mul(torch.cat([x @ w["gate"].T, x @ w["up"].T], dim=-1))
    full_y = full_h @ w["down"].T

    def mlp(rank: int) -> torch.Tensor:
        return ranks[rank].down.forward(silu_and_mul(ranks[rank].gate_up.forward(x)))

    comm.sent = [[] for _ in range(TP)]
    ys = comm.run(mlp)
    partials = [comm.sent[r][0][1] for r in range(TP)]
    assert all(len(s) == 1 and s[0][0] == "all_reduce" for s in comm.sent)  # 整个 MLP 只通信一次
    for r, p in enumerate(partials):
        print(f"  rank {r} 交给 all_reduce 的部分和 {shape(p)}：与完整输出差 max |Δ| = {max_diff(p, full_y):.2f}")
        assert max_diff(p, full_y) > 0.1
    total = partials[0] + partials[1]
    print("  两份部分和相加：与完整输出差 max |Δ| < 1e-4；all_reduce 之后两个 rank 拿到的都是它")
    assert max_diff(total, full_y) < 1e-4
    assert all(max_diff(y, full_y) < 1e-4 for y in ys)
    print("  整个 MLP（gate_up 列并行 → silu_and_mul → down 行并行）只在最后通信了一次")
    print()


def section_vocab(w, ranks: list[RankLayers], comm: ThreadComm, ctx: Context) -> None:
    print("六、词表并行：嵌入按 id 查表、LM head 乘回词表")
    ids = torch.tensor([0, 5, 6, 10], dtype=torch.int32)
    comm.sent = [[] for _ in range(TP)]
    embs = comm.run(lambda r: ranks[r].embed.forward(ids))
    contrib = [comm.sent[r][0][1] for r in range(TP)]
    for r in range(TP):
        start = ranks[r].embed.vocab_start
        end = start + ranks[r].embed.rows_per_rank
        padded = f"（id {VOCAB} 起是补的零行，词表里没有）" if end > VOCAB else ""
        print(f"  rank {r} 存 id [{start}, {end}) 的行{padded}：")
        marks = ["非零" if row.abs().sum() > 0 else "全 0" for row in contrib[r]]
        print("    " + "，".join(f"id {i} → {m}" for i, m in zip(ids.tolist(), marks)))
        for i, row in zip(ids.tolist(), contrib[r]):
            assert (row.abs().sum() > 0) == (start <= i < start + ranks[r].embed.rows_per_rank)
    full_emb = w["embed"][ids.long()]
    assert all(max_diff(e, full_emb) == 0 for e in embs)
    print("  all_reduce 相加：每个 id 恰好一个 rank 给了非零行，结果与完整词表查表完全相同")

    batch = make_batch([2, 1])  # 两个请求：2 个 token 和 1 个 token
    x = torch.randn(3, HIDDEN, generator=torch.Generator().manual_seed(4))

    comm.sent = [[] for _ in range(TP)]
    with ctx.forward_batch(batch):  # 两个 rank（线程）读的是同一个全局上下文里的同一个批次
        logits = comm.run(lambda r: ranks[r].lm_head.forward(x))
    local = [comm.sent[r][0][1] for r in range(TP)]
    full = x[[1, 2]] @ w["embed"].T
    print("  LM head（与嵌入共享权重）：批里 2 个请求共 3 个 token，prefill 只取每个请求的最后一个 token（第 1、2 行）")
    print(f"    每个 rank 算自己那段词表：{shape(local[0])}；all_gather 得 {shape(torch.cat(local))}，"
          f"重排成 [2, {2 * local[0].shape[1]}]，切掉补零的 1 列 → {shape(logits[0])}")
    assert local[0].shape == (2, -(-VOCAB // TP)) and logits[0].shape == (2, VOCAB)
    assert all(max_diff(lg, full) < 1e-4 for lg in logits)
    print("    与完整权重算出的 logits 一致（max |Δ| < 1e-4）")
    print()


def main() -> None:
    print("第 2 章：算子层\n")
    torch.manual_seed(0)
    cfg = json.loads((smollm2() / "config.json").read_text(encoding="utf-8"))
    ctx = Context(page_size=1)
    ctx.attn_backend = CausalAttention()
    set_global_ctx(ctx)
    block = section_one_rank(cfg)
    section_forward(block, cfg, ctx)

    w = full_weights()
    ranks = section_shards(w)
    comm = ThreadComm(TP)
    old_plugins = DistributedCommunicator.plugins
    DistributedCommunicator.plugins = [*old_plugins, comm]  # 用最后一个插件：我们的假通信
    try:
        x = torch.randn(3, HIDDEN, generator=torch.Generator().manual_seed(3))
        section_column(w, ranks, comm, x)
        section_row(w, ranks, comm, x)
        section_vocab(w, ranks, comm, ctx)
    finally:
        DistributedCommunicator.plugins = old_plugins
        set_tp_info(0, 1)  # 模拟结束：回到单卡
    assert get_tp_info().size == 1
    print("模拟结束，set_tp_info(0, 1) 回到单卡。")


if __name__ == "__main__":
    main()
