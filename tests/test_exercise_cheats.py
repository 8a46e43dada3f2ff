"""判题练习的“作弊答案”：每道题的测试都要拒绝绕过这道题要点的答案。

BOOK.md 的坑：只检查“能跑”的测试，删掉代码也能过。这里把我们试过的作弊答案都留下来，每一个都必须被
这道题自己的 test.py 判“未通过”：

1. 一道题一道题挑出来的作弊（CHEATS）：参考答案 solution.py 后面接一段覆盖某个函数的代码（或者一份完整的
   文件），写的是“看起来对、却绕过了要点”的做法——比如 008 把各 rank 的部分和扔掉、直接返回不切的 MLP，
   009 交出完整张量的视图，017 按请求、按头循环手算 softmax。`expect` 是判词里必须出现的字样：
   不光要判错，还要因为对的理由判错。
2. 能推广到每道题的检查：参考答案里每一个公开的函数，单独换成 `raise NotImplementedError`，测试都必须
   判“未通过”——测试没有调用到的函数，写成什么样都能过。

评测走 judgekit 的协议（JUDGE_TARGET 指向被评测的文件，JUDGE_RESULT 指向结论的 JSON），不依赖 judge.py。
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRACTICE = ROOT / "practice"


@dataclass(frozen=True)
class Cheat:
    exercise: str  # practice/ 下的文件夹名
    name: str  # 这个作弊做了什么
    code: str  # 接在 solution.py 后面的代码；full=True 时是整个文件
    expect: str = ""  # 判词里必须出现的字样
    full: bool = False

    @property
    def id(self) -> str:
        return f"{self.exercise[:3]}-{self.name}"


def judge(exercise: str, source: str, tmp_path: Path, timeout: float = 300) -> dict:
    """用题目自己的 test.py 评测一段源码，返回 judgekit 的结论字典。"""
    target = tmp_path / "answer.py"
    target.write_text(source, encoding="utf-8")
    result = tmp_path / "result.json"
    env = {**os.environ, "JUDGE_TARGET": str(target), "JUDGE_RESULT": str(result),
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(PRACTICE / exercise / "test.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert result.is_file(), f"test.py 没有写出结论：\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return json.loads(result.read_text(encoding="utf-8"))


def solution(exercise: str) -> str:
    return (PRACTICE / exercise / "solution.py").read_text(encoding="utf-8")


def patched(exercise: str, old: str, new: str) -> str:
    """参考答案里把一处换掉：作弊只改这一处，其余和参考答案一样。"""
    source = solution(exercise)
    assert source.count(old) == 1, f"{exercise}/solution.py 里找不到（或不止一处）：{old}"
    return source.replace(old, new)


CHEATS = [
    # ---- 001 右下对齐的因果掩码
    Cheat("001_causal_attention", "SDPA 的 is_causal（左上角对齐）", '''
def attention(q, k, v):
    import torch.nn.functional as F
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1).transpose(0, 1)
    v = v.repeat_interleave(group, dim=1).transpose(0, 1)
    return F.scaled_dot_product_attention(q.transpose(0, 1), k, v, is_causal=True).transpose(0, 1)
'''),
    Cheat("001_causal_attention", "GQA 用 repeat 而不是 repeat_interleave", '''
_orig_attention = attention
def attention(q, k, v):
    group = q.shape[1] // k.shape[1]
    n, m = q.shape[0], k.shape[0]
    k = k.repeat(1, group, 1)
    v = v.repeat(1, group, 1)
    scores = torch.einsum("nhd,mhd->hnm", q, k) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~causal_mask(n, m), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.transpose(0, 1)).transpose(0, 1)
'''),
    # ---- 002 贪心生成循环
    Cheat("002_greedy_generate", "每一步把整段序列重算一遍", '''
def greedy_generate(prompt, step, max_new_tokens, eos_id=None):
    seq, new_ids = list(prompt), []
    while True:
        next_id = argmax(step(list(seq), 0))
        new_ids.append(next_id)
        seq.append(next_id)
        if len(new_ids) == max_new_tokens or next_id == eos_id:
            return new_ids
'''),
    # ---- 003 请求的长度记账
    Cheat("003_req_lengths", "extend_len 在构造时算好存成数字", '''
_Orig = ReqState
class ReqState(_Orig):
    def __init__(self, input_ids, cached_len, output_len):
        super().__init__(input_ids, cached_len, output_len)
        self.__dict__["_frozen"] = self.device_len - self.cached_len
    extend_len = property(lambda self: self._frozen)
'''),
    # ---- 004 批的 positions
    Cheat("004_batch_positions", "positions 每段从 0 开始", '''
def batch_positions(spans):
    extend_lens(spans)
    return [i for c, d in spans for i in range(d - c)]
'''),
    # ---- 005 KV 头的切分与复制
    Cheat("005_kv_head_shards", "复制时 rank r 拿 r % 头数", '''
def kv_heads_of_rank(num_kv_heads, tp_size, tp_rank):
    local = div_even(num_kv_heads, tp_size, allow_replicate=True)
    if not (0 <= tp_rank < tp_size) or num_kv_heads <= 0:
        raise ValueError("bad")
    if num_kv_heads < tp_size:
        return [tp_rank % num_kv_heads]
    return list(range(tp_rank * local, (tp_rank + 1) * local))
'''),
    # ---- 006 带残差的 RMSNorm
    Cheat("006_rmsnorm_residual", "在输入的 dtype 里算（不转 float32）", '''
def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError("weight 形状不对")
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.to(x.dtype)
'''),
    Cheat("006_rmsnorm_residual", "交回去的残差是归一化之后的值", '''
_orig_add = add_rms_norm
def add_rms_norm(x, residual, weight, eps):
    normed, _ = _orig_add(x, residual, weight, eps)
    return normed, normed
'''),
    Cheat("006_rmsnorm_residual", "eps 加在根号外面", '''
def rms_norm(x, weight, eps):
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError("weight 形状不对")
    h = x.float()
    h = h / (h.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)
    return (h * weight.float()).to(x.dtype)
'''),
    # ---- 007 RoPE
    Cheat("007_rope", "相邻两维成对（交错排布）", '''
def _rotate(x, c, s):
    h = x.float()
    x1, x2 = h[..., 0::2], h[..., 1::2]
    out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    return out.to(x.dtype)
'''),
    Cheat("007_rope", "不看 positions，按行号旋转", '''
_orig_apply = apply_rope
def apply_rope(positions, q, k, cos, sin):
    _orig_apply(positions, q, k, cos, sin)  # 只为参数检查
    return _orig_apply(torch.arange(positions.shape[0]), q, k, cos, sin)
'''),
    # ---- 008 模拟两路张量并行的 MLP
    Cheat("008_tp_linear_simulation", "调用每个 rank 的 rank_mlp，却把部分和扔掉、返回不切的 MLP", '''
def tp_mlp(x, gate, up, down, size):
    for rank in range(size):
        rank_mlp(x, gate_up_shard(gate, up, rank, size), row_shard(down, rank, size))
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T
''', expect="记号"),
    Cheat("008_tp_linear_simulation", "不调用 rank_mlp，直接算不切的 MLP", '''
def tp_mlp(x, gate, up, down, size):
    for rank in range(size):
        gate_up_shard(gate, up, rank, size)
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T
''', expect="rank_mlp"),
    # ---- 009 shard_tensor
    Cheat("009_shard_tensor", "交出完整张量的视图（第 3 章 _own 修掉的 bug）", '''
def _own(piece):
    return piece.contiguous()
''', expect="视图"),
    Cheat("009_shard_tensor", "先整个拷一份，再交出拷贝的视图", '''
_orig_shard = shard_tensor
def shard_tensor(key, value, rank, size, num_kv_heads):
    global _own
    saved, _own = _own, (lambda piece: piece.contiguous())
    try:
        return _orig_shard(key, value.clone(), rank, size, num_kv_heads)
    finally:
        _own = saved
''', expect="更大张量的视图"),
    # ---- 010 流式合并
    Cheat("010_merge_stream", "先把整个输入读进列表再处理", '''
_orig_merge = merge_stream
def merge_stream(items):
    yield from _orig_merge(list(items))
'''),
    Cheat("010_merge_stream", "凑齐的组不从缓冲里删掉", '''
def merge_stream(items):
    done = {}
    pending = {}
    for name, value in items:
        parts = name.split(".")
        module, param = (parts[-2] if len(parts) >= 2 else ""), parts[-1]
        merged = PIECE_TO_GROUP.get(module)
        if merged is None or param not in ("weight", "bias"):
            yield name, value
            continue
        prefix = ".".join(parts[:-2])
        group = pending.setdefault((prefix, merged, param), {})
        group[module] = value
        if len(group) == len(GROUPS[merged]):
            done[(prefix, merged, param)] = group  # 留着不删
            out = []
            for piece in GROUPS[merged]:
                out.extend(group[piece])
            yield _full_name(prefix, merged, param), out
    missing = [_full_name(p, piece, param) for (p, merged, param), g in pending.items()
               if (p, merged, param) not in done for piece in GROUPS[merged] if piece not in g]
    if missing:
        raise ValueError("缺少：" + "、".join(missing))
'''),
    # ---- 011 每个 rank 的形状
    Cheat("011_config_shapes", "词表不补零（向下取整）", '''
_orig_shapes = rank_shapes
def rank_shapes(config, tp_size):
    shapes = _orig_shapes(config, tp_size)
    rows = config["vocab_size"] // tp_size
    for key in ("embed_tokens", "lm_head"):
        if shapes[key] is not None:
            shapes[key] = (rows,) + tuple(shapes[key][1:])
    return shapes
'''),
    # ---- 012 按页分配槽位
    Cheat("012_page_slots", "空闲页不够时先把够的部分填上", '''
def alloc_slots(table, row, start, end, free_pages, page_size):
    if page_size < 1 or not (0 <= start <= end <= len(table[row])):
        raise ValueError("参数不对")
    line, out = table[row], []
    for pos in range(start, end):
        if pos % page_size == 0:
            if not free_pages:
                raise RuntimeError("没有空闲页了")
            slot = free_pages.pop(0) * page_size
        else:
            slot = line[pos - 1] + 1
        line[pos] = slot
        out.append(slot)
    return out
'''),
    Cheat("012_page_slots", "每次分配都开新页，不接着用最后一页", '''
def alloc_slots(table, row, start, end, free_pages, page_size):
    if page_size < 1 or not (0 <= start <= end <= len(table[row])):
        raise ValueError("参数不对")
    need = _pages_up_to(end - start, page_size)
    if need > len(free_pages):
        raise RuntimeError("没有空闲页了")
    pages = free_pages[:need]
    del free_pages[:need]
    out = [pages[i // page_size] * page_size + i % page_size for i in range(end - start)]
    table[row][start:end] = out
    return out
'''),
    # ---- 013 写进池子、按页表取回
    Cheat("013_store_gather_kv", "store_kv 写进一份拷贝（不是原地）", '''
def store_kv(k_buf, v_buf, k, v, out_loc):
    expected = (out_loc.shape[0], *k_buf.shape[1:])
    if tuple(k.shape) != expected or tuple(v.shape) != expected:
        raise ValueError("形状不对")
    k_buf = k_buf.clone()
    v_buf = v_buf.clone()
    k_buf[out_loc] = k
    v_buf[out_loc] = v
'''),
    Cheat("013_store_gather_kv", "逐个 token 循环写、循环读", '''
def store_kv(k_buf, v_buf, k, v, out_loc):
    expected = (out_loc.shape[0], *k_buf.shape[1:])
    if tuple(k.shape) != expected or tuple(v.shape) != expected:
        raise ValueError("形状不对")
    for i, slot in enumerate(out_loc.tolist()):
        k_buf[slot] = k[i]
        v_buf[slot] = v[i]

def gather_kv(k_buf, v_buf, page_table_row, length):
    if not (0 <= length <= page_table_row.shape[0]):
        raise ValueError("length 不对")
    slots = page_table_row[:length].tolist()
    if not slots:
        return k_buf[:0].clone(), v_buf[:0].clone()
    return torch.stack([k_buf[s] for s in slots]), torch.stack([v_buf[s] for s in slots])
''', expect="运算次数"),
    # ---- 014 KV 池预算
    Cheat("014_kv_pool_budget", "张量并行时仍按全部 KV 头算", '''
def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size=1):
    _check_positive(num_layers=num_layers, head_dim=head_dim)
    local_kv_heads(num_kv_heads, tp_size)  # 只为参数检查
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes(dtype)
'''),
    Cheat("014_kv_pool_budget", "最后不满一页的零头也算一页", '''
_orig_pages = num_pages
def num_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size=1):
    _orig_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size)
    per = kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size) * page_size
    return -(-budget_bytes // per)
'''),
    # ---- 015 变长批次的元数据
    Cheat("015_varlen_metadata", "掩码左上角对齐（tril）", '''
def causal_mask(cached_len, device_len):
    _check_span(cached_len, device_len)
    return [[1 if j <= i else 0 for j in range(device_len)] for i in range(device_len - cached_len)]
'''),
    # ---- 016 分页的 prefill 注意力
    Cheat("016_paged_prefill_attention", "SDPA 的 is_causal（左上角对齐）", '''
def paged_prefill_attention(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens):
    _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens)
    group = q.shape[1] // k_buf.shape[1]
    out, start = torch.empty_like(q), 0
    for row, cached, ext in zip(table_idx, cached_lens, extend_lens):
        slots = page_table[row, : cached + ext]
        k = k_buf[slots].repeat_interleave(group, dim=1).transpose(0, 1)
        v = v_buf[slots].repeat_interleave(group, dim=1).transpose(0, 1)
        o = F.scaled_dot_product_attention(q[start : start + ext].transpose(0, 1), k, v, is_causal=True)
        out[start : start + ext] = o.transpose(0, 1)
        start += ext
    return out
'''),
    Cheat("016_paged_prefill_attention", "不查页表，当作槽位从 0 开始连续", '''
def paged_prefill_attention(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens):
    _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens)
    group = q.shape[1] // k_buf.shape[1]
    out, start = torch.empty_like(q), 0
    for row, cached, ext in zip(table_idx, cached_lens, extend_lens):
        total = cached + ext
        base = int(page_table[row, 0])
        k = k_buf[base : base + total].repeat_interleave(group, dim=1).transpose(0, 1)
        v = v_buf[base : base + total].repeat_interleave(group, dim=1).transpose(0, 1)
        mask = torch.arange(total)[None, :] <= torch.arange(cached, total)[:, None]
        o = F.scaled_dot_product_attention(q[start : start + ext].transpose(0, 1), k, v, attn_mask=mask)
        out[start : start + ext] = o.transpose(0, 1)
        start += ext
    return out
'''),
    # ---- 017 一次算完一批 decode
    Cheat("017_padded_decode_attention", "按请求、按头循环，手写 softmax", '''
import math
def padded_attention(q, k, v, valid):
    B, Hq, D = q.shape
    group = Hq // k.shape[2]
    out = torch.empty_like(q)
    for b in range(B):
        n = int(valid[b].sum())
        for h in range(Hq):
            kk = k[b, :n, h // group].double()
            s = (kk @ q[b, h].double()) / math.sqrt(D)
            w = torch.exp(s - s.max())
            out[b, h] = ((w / w.sum()) @ v[b, :n, h // group].double()).to(q.dtype)
    return out
''', expect="Python"),
    Cheat("017_padded_decode_attention", "按请求、按头循环，用掩码而不取数", '''
import math
def padded_attention(q, k, v, valid):
    B, Hq, D = q.shape
    group = Hq // k.shape[2]
    out = torch.empty_like(q)
    for b in range(B):
        for h in range(Hq):
            s = (k[b, :, h // group] @ q[b, h]) / math.sqrt(D)
            s = s.masked_fill(~valid[b], float("-inf"))
            out[b, h] = torch.softmax(s, -1) @ v[b, :, h // group]
    return out
''', expect="运算次数"),
    Cheat("017_padded_decode_attention", "把张量全转成 Python 的数自己算", '''
import math
def padded_attention(q, k, v, valid):
    Q, K, V, M = q.tolist(), k.tolist(), v.tolist(), valid.tolist()
    B, Hq, D = q.shape
    group = Hq // k.shape[2]
    res = []
    for b in range(B):
        rows = []
        for h in range(Hq):
            keys = [j for j in range(len(M[b])) if M[b][j]]
            s = [sum(a * c for a, c in zip(Q[b][h], K[b][j][h // group])) / math.sqrt(D) for j in keys]
            top = max(s)
            w = [math.exp(x - top) for x in s]
            t = sum(w)
            rows.append([sum(w[i] / t * V[b][j][h // group][e] for i, j in enumerate(keys)) for e in range(D)])
        res.append(rows)
    return torch.tensor(res, dtype=q.dtype)
''', expect="tolist"),
    Cheat("017_padded_decode_attention", "decode_attention 按请求各调一次 padded_attention", '''
def decode_attention(q, k_buf, v_buf, page_table, table_idx, seq_lens):
    outs = []
    for b in range(q.shape[0]):
        k, v, valid = gather_padded(k_buf, v_buf, page_table, table_idx[b : b + 1], seq_lens[b : b + 1])
        outs.append(padded_attention(q[b : b + 1], k, v, valid))
    if len(table_idx) != q.shape[0] or len(seq_lens) != q.shape[0] or q.shape[1] % k_buf.shape[1]:
        raise ValueError("参数不对")
    return torch.cat(outs)
'''),
    # ---- 018 top-k / top-p
    Cheat("018_top_k_top_p", "先 top-p 再 top-k", '''
def top_k_top_p_filter(logits, top_k, top_p):
    _check_arguments(logits, top_k, top_p)
    B, V = logits.shape
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    rank = torch.arange(V).expand(B, V)
    probs = torch.softmax(sorted_logits.double(), dim=-1)
    ahead = torch.cumsum(probs, dim=-1) - probs
    ahead[:, 0] = 0.0
    p = top_p.double()[:, None]
    keep = (p >= 1) | (ahead < p)
    k = torch.where((top_k < 0) | (top_k >= V), V, top_k).to(rank.dtype)
    keep &= rank < k[:, None]
    keep_by_id = torch.zeros_like(keep).scatter(1, order, keep)
    return logits.masked_fill(~keep_by_id, float("-inf"))
'''),
    Cheat("018_top_k_top_p", "top-p 把越过 p 的那个 token 也扔掉", '''
def top_k_top_p_filter(logits, top_k, top_p):
    _check_arguments(logits, top_k, top_p)
    B, V = logits.shape
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    rank = torch.arange(V).expand(B, V)
    k = torch.where((top_k < 0) | (top_k >= V), V, top_k).to(rank.dtype)
    keep = rank < k[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(~keep, float("-inf")).double(), dim=-1)
    upto = torch.cumsum(probs, dim=-1)
    p = top_p.double()[:, None]
    keep &= (p >= 1) | (upto <= p)
    keep[:, 0] = True
    keep_by_id = torch.zeros_like(keep).scatter(1, order, keep)
    return logits.masked_fill(~keep_by_id, float("-inf"))
'''),
    # ---- 019 按请求采样
    Cheat("019_seeded_sampling", "先过滤再除以温度", '''
def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    greedy = (temperatures == 0) | (top_k == 1)
    out = logits.argmax(dim=-1)
    rows = (~greedy).nonzero().flatten()
    if rows.numel() > 0:
        x = top_k_top_p_filter(logits[rows].float(), top_k[rows], top_p[rows])
        probs = torch.softmax(x / temperatures[rows, None].float(), dim=-1)
        out[rows] = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return out
'''),
    Cheat("019_seeded_sampling", "不分出贪心行：温度 0 换成极小的数，全部抽样", '''
def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    t = temperatures.float().clamp(min=1e-6)
    x = top_k_top_p_filter(logits.float() / t[:, None], top_k, top_p)
    return torch.multinomial(torch.softmax(x, -1), 1, generator=generator).squeeze(1)
''', expect="贪心"),
    Cheat("019_seeded_sampling", "用全局随机数（不传 generator）", '''
_orig_sample = sample
def sample(logits, temperatures, top_k, top_p, generator):
    return _orig_sample(logits, temperatures, top_k, top_p, None)
'''),
    Cheat("019_seeded_sampling", "不管温度和过滤，全部贪心", '''
def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    return logits.argmax(dim=-1)
'''),
    # ---- 020 批量生成的主循环
    Cheat("020_decode_loop", "一个请求一个请求地生成（批大小总是 1）", '''
def generate_batch(prompts, max_tokens, step, eos_id=None, ignore_eos=None):
    n = len(prompts)
    ignore_eos = [False] * n if ignore_eos is None else ignore_eos
    if len(max_tokens) != n or len(ignore_eos) != n or any(not p for p in prompts) or any(m < 1 for m in max_tokens):
        raise ValueError("参数不对")
    outputs, sizes = [[] for _ in range(n)], []
    for i in range(n):
        batch = [(i, list(prompts[i]), 0)]
        while True:
            token = step(batch)[0]
            sizes.append(1)
            outputs[i].append(token)
            if len(outputs[i]) == max_tokens[i] or (eos_id is not None and not ignore_eos[i] and token == eos_id):
                break
            batch = [(i, [token], len(prompts[i]) + len(outputs[i]) - 1)]
    return outputs, sizes
'''),
    Cheat("020_decode_loop", "结束的请求留在批里，直到所有请求都结束", '''
def generate_batch(prompts, max_tokens, step, eos_id=None, ignore_eos=None):
    n = len(prompts)
    ignore_eos = [False] * n if ignore_eos is None else ignore_eos
    if len(max_tokens) != n or len(ignore_eos) != n or any(not p for p in prompts) or any(m < 1 for m in max_tokens):
        raise ValueError("参数不对")
    outputs, sizes, done = [[] for _ in range(n)], [], [False] * n
    batch = [(i, list(prompts[i]), 0) for i in range(n)]
    while batch:
        tokens = step(batch)
        sizes.append(len(batch))
        for (i, _, _), t in zip(batch, tokens):
            if not done[i]:
                outputs[i].append(t)
                done[i] = len(outputs[i]) == max_tokens[i] or (eos_id is not None and not ignore_eos[i] and t == eos_id)
        if all(done):
            break
        batch = [(i, [outputs[i][-1]], len(prompts[i]) + len(outputs[i]) - 1) for i in range(n)]
    return outputs, sizes
'''),
    # ---- 021 先来先服务的接纳
    Cheat("021_fcfs_admission", "放不下的请求跳过去，接着试后面的", '''
def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    _check_page_size(page_size)
    pages_left, admitted = free_pages - inflight, []
    for i, (prompt_len, max_tokens) in enumerate(queue):
        worst = _div_ceil(prompt_len + max_tokens - 1, page_size)
        if free_rows and (not admitted or prompt_len <= token_budget) and worst <= pages_left:
            admitted.append(i)
            free_rows, token_budget, pages_left = free_rows - 1, token_budget - prompt_len, pages_left - worst
    return admitted
''', expect="插了队"),
    Cheat("021_fcfs_admission", "只给提示留页（乐观接纳）", '''
def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    _check_page_size(page_size)
    pages_left, admitted = free_pages - inflight, []
    for i, (prompt_len, max_tokens) in enumerate(queue):
        if not free_rows or (admitted and prompt_len > token_budget):
            break
        worst = _div_ceil(prompt_len, page_size)
        if worst > pages_left:
            break
        admitted.append(i)
        free_rows, token_budget, pages_left = free_rows - 1, token_budget - prompt_len, pages_left - worst
    return admitted
''', expect="只给提示留了页"),
    Cheat("021_fcfs_admission", "不管在跑的请求将来要的页", '''
_admit = admit
def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    return _admit(queue, free_rows=free_rows, free_pages=free_pages, inflight=0, page_size=page_size,
                  token_budget=token_budget)
''', expect="没有减去在跑的请求还要的页"),
    Cheat("021_fcfs_admission", "在跑的请求把最后一个 token 也算进去", '''
def inflight_pages(running, page_size):
    _check_page_size(page_size)
    return sum(_div_ceil(m, page_size) - _div_ceil(c, page_size) for c, m in running)
''', expect="不进 KV 池"),
    Cheat("021_fcfs_admission", "算完把调用者的 running 清空", '''
_inflight = inflight_pages
def inflight_pages(running, page_size):
    pages = _inflight(running, page_size)
    running.clear()
    return pages
''', expect="running（不应该被改动）"),
    # ---- 022 静态批处理与连续批处理
    Cheat("022_batching_steps", "静态批处理也在有空位时接纳（当成连续批处理）", '''
_continuous = simulate
def simulate(requests, max_running, continuous):
    return _continuous(requests, max_running, True)
''', expect="静态批处理在还有请求在跑的时候接纳了新请求"),
    Cheat("022_batching_steps", "prefill 的那一步把在跑的请求也带上", '''
def simulate(requests, max_running, continuous):
    if max_running < 1 or any(m < 1 for _, m in requests) or len({u for u, _ in requests}) != len(requests):
        raise ValueError("参数不对")
    limit, queue, running, steps = dict(requests), [u for u, _ in requests], [], []
    produced = dict.fromkeys(limit, 0)
    while queue or running:
        free = max_running - len(running)
        if queue and free > 0 and (continuous or not running):
            new, queue = queue[:free], queue[free:]
            running = running + new
            batch = list(running)
            steps.append(("prefill", batch))
        else:
            batch = list(running)
            steps.append(("decode", batch))
        for u in batch:
            produced[u] += 1
        running = [u for u in running if produced[u] < limit[u]]
    return steps
''', expect="prefill 这一步把在跑的请求也放进来了"),
    Cheat("022_batching_steps", "decode 批按 uid 排序（而不是接纳的先后）", '''
_admission_order = simulate
def simulate(requests, max_running, continuous):
    return [(p, sorted(b) if p == "decode" else b) for p, b in _admission_order(requests, max_running, continuous)]
''', expect="按接纳的先后排"),
    Cheat("022_batching_steps", "短的先来（不是先来先服务）", '''
_fcfs = simulate
def simulate(requests, max_running, continuous):
    return _fcfs(sorted(requests, key=lambda r: r[1]), max_running, continuous)
''', expect="先来先服务"),
    # ---- 023 token 池的下标
    Cheat("023_token_pool_indices", "新 token 写在 device_len - 1（覆盖了最后一个输入 token）", '''
def write_indices(reqs):
    return (torch.tensor([r[0] for r in reqs], dtype=torch.int64),
            torch.tensor([r[2] - 1 for r in reqs], dtype=torch.int64))
''', expect="写在了 device_len - 1"),
    Cheat("023_token_pool_indices", "最后一个 token 也写在 device_len（不按题目写到 -1）", '''
def write_indices(reqs):
    return (torch.tensor([r[0] for r in reqs], dtype=torch.int64),
            torch.tensor([r[2] for r in reqs], dtype=torch.int64))
''', expect="它要写到 -1"),
    Cheat("023_token_pool_indices", "位置从 0 数（忘了 cached_len）", '''
def input_indices(reqs):
    lens = [r[2] - r[1] for r in reqs]
    rows = [r[0] for r, n in zip(reqs, lens) for _ in range(n)]
    positions = [p for n in lens for p in range(n)]
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64)
''', expect="位置从 0 数了"),
    Cheat("023_token_pool_indices", "每步把整段序列 [0, device_len) 都当输入", '''
def input_indices(reqs):
    rows = [r[0] for r in reqs for _ in range(r[2])]
    positions = [p for r in reqs for p in range(r[2])]
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64)
''', expect="形状"),
    # ---- 024 按持有份数管理的页池
    Cheat("024_page_refcounts", "一还就空闲，不看还剩几份（上游的做法）", '''
_orig_release = PagePool.release
def _release(self, pages):
    self._check_pages(pages)
    freed = []
    for page in pages:
        if self._refs[page] == 0:
            raise ValueError("放多了")
        if page not in self._free:
            self._refs[page] = 0
            self._free.append(page)
            freed.append(page)
    return freed
PagePool.release = _release
''', expect="各剩 1 份"),
    Cheat("024_page_refcounts", "hold 不查空闲页", '''
def _hold(self, pages):
    self._check_pages(pages)
    for page in pages:
        if self._refs[page] == 0 and page in self._free:
            self._free.remove(page)
        self._refs[page] += 1
PagePool.hold = _hold
''', expect="里面有空闲页"),
    Cheat("024_page_refcounts", "alloc 不够时先分了一部分再报错", '''
def _alloc(self, n):
    pages = []
    while len(pages) < n:
        if not self._free:
            raise ValueError("不够")
        page = self._free.pop()
        self._refs[page] = 1
        pages.append(page)
    return pages
PagePool.alloc = _alloc
''', expect="应该是 0"),
    Cheat("024_page_refcounts", "release 不查页号（-1 被当成最后一页）", '''
def _release_unchecked(self, pages):
    from collections import Counter
    for page, times in Counter(pages).items():
        if self._refs[page] < times:
            raise ValueError("放多了")
    freed = []
    for page in pages:
        self._refs[page] -= 1
        if self._refs[page] == 0:
            self._free.append(page)
            freed.append(page)
    return freed


PagePool.release = _release_unchecked
''', expect="-1 号页不存在"),
    # ---- 025 按最坏情况接纳
    Cheat("025_worst_case_admission", "忘了在跑的请求将来还要的页", '''
_orig_admit = admit
def admit(pending, running, **kw):
    return _orig_admit(pending, [], **kw)
''', expect="忘了在跑的请求"),
    Cheat("025_worst_case_admission", "先数后锁", '''
def admit(pending, running, *, page_size, free_pages, evictable_pages, free_rows, token_budget):
    _validate(pending, running, page_size, {"free_pages": free_pages, "evictable_pages": evictable_pages,
              "free_rows": free_rows, "token_budget": token_budget})
    reserved = sum(_ceil_div(e - 1, page_size) - _ceil_div(s, page_size) for s, e in running)
    admitted = 0
    for input_len, max_tokens, cached_len, lock_pages in pending:
        if admitted == free_rows or (admitted > 0 and input_len - cached_len > token_budget):
            break
        worst = _ceil_div(input_len + max_tokens - 1, page_size) - cached_len // page_size
        if worst + reserved > free_pages + evictable_pages:
            break
        evictable_pages -= lock_pages
        token_budget -= input_len - cached_len
        reserved += worst
        admitted += 1
    return admitted
''', expect="应该接纳"),
    Cheat("025_worst_case_admission", "放不下就跳过，接着试后面的", '''
_orig_admit = admit
def admit(pending, running, **kw):
    taken = []
    for i, req in enumerate(pending):
        if _orig_admit(taken + [req], running, **kw) == len(taken) + 1:
            taken.append(req)
    return len(taken)
''', expect="应该接纳"),
    Cheat("025_worst_case_admission", "只查 free_pages 是不是负数", '''
_validate_all = _validate
def _validate(pending, running, page_size, counts):
    _validate_all(pending, running, page_size, {"free_pages": counts["free_pages"]})
''', expect="evictable_pages 是负数"),
    Cheat("025_worst_case_admission", "负的 lock_pages 当成 0", '''
_admit = admit
def admit(pending, running, **kw):
    pending = [(i, m, c, max(lock, 0)) for i, m, c, lock in pending]
    return _admit(pending, running, **kw)
''', expect="lock_pages 是负数"),
    # ---- 026 把算好的前缀交给缓存
    Cheat("026_cache_req_ownership", "缓存里已经有的重复页当场还掉（上游的做法）", '''
def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens) or cached_len > len(row_pages) * page_size:
        raise ValueError("参数不对")
    n = cached_len // page_size
    borrowed = 0  # 借来的页缓存也持有，份数 ≥ 2
    while borrowed < n and pool.refs[row_pages[borrowed]] >= 2:
        borrowed += 1
    already = cache.insert(list(tokens[:n * page_size]), list(row_pages[:n]))
    pool.hold(list(row_pages[already:n]))
    if finished:
        pool.release(list(row_pages))
    else:
        pool.release(list(row_pages[borrowed:already]))  # 上游：重复的页当场还回空闲页
    return n * page_size
''', expect="只归 B 的行"),
    Cheat("026_cache_req_ownership", "原来就在缓存里的页也让缓存加一份", '''
_orig_cache_req = cache_req
def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens) or cached_len > len(row_pages) * page_size:
        raise ValueError("参数不对")
    n = cached_len // page_size
    cache.insert(list(tokens[:n * page_size]), list(row_pages[:n]))
    pool.hold(list(row_pages[:n]))
    if finished:
        pool.release(list(row_pages))
    return n * page_size
''', expect="持有份数"),
    Cheat("026_cache_req_ownership", "不满一页的尾巴也交给缓存", '''
def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens) or cached_len > len(row_pages) * page_size:
        raise ValueError("参数不对")
    n = -(-cached_len // page_size)
    already = cache.insert(list(tokens[:cached_len]), list(row_pages[:n]))
    pool.hold(list(row_pages[already:n]))
    if finished:
        pool.release(list(row_pages))
    return cached_len
''', expect="只收整页"),
    # ---- 027 按整页匹配和插入的 radix 树
    Cheat("027_radix_match_insert", "匹配停在节点中间时不切分", '''
def _match_without_split(self, ids):
    ids, node, matched, values = list(ids), self.root, 0, []
    while matched < len(ids):
        rest = ids[matched:]
        child = node.children.get(tuple(rest[: self.page_size]))
        if child is None:
            break
        n = 0
        while n < min(len(child.key), len(rest)) and child.key[n] == rest[n]:
            n += 1
        n -= n % self.page_size
        values, matched = values + child.value[:n], matched + n
        if n < len(child.key):
            break
        node = child
    return matched, values


RadixTree.match = _match_without_split
''', expect="切成两段"),
    Cheat("027_radix_match_insert", "新节点直接存调用者的列表（不拷贝）", '''
def _insert_without_copy(self, ids, values):
    if len(ids) != len(values):
        raise ValueError("长度不同")
    n = len(ids) - len(ids) % self.page_size
    node, matched = self._walk(list(ids[:n]))
    if matched < n:
        whole = matched == 0 and n == len(ids)
        child = Node(ids if whole else ids[matched:n], values if whole else values[matched:n], node)
        node.children[tuple(child.key[: self.page_size])] = child
    return matched


RadixTree.insert = _insert_without_copy
''', expect="拷贝"),
    Cheat("027_radix_match_insert", "不建树：一个字典记住每个整页前缀", '''
class RadixTree:
    def __init__(self, page_size):
        self.page_size, self.root, self.pages = page_size, Node([], [], None), {}

    def match(self, ids):
        n, values = 0, []
        while n + self.page_size <= len(ids) and tuple(ids[: n + self.page_size]) in self.pages:
            values += self.pages[tuple(ids[: n + self.page_size])]
            n += self.page_size
        return n, values

    def insert(self, ids, values):
        if len(ids) != len(values):
            raise ValueError("长度不同")
        cached = self.match(ids)[0]
        for end in range(cached + self.page_size, len(ids) - len(ids) % self.page_size + 1, self.page_size):
            self.pages[tuple(ids[:end])] = list(values[end - self.page_size : end])
        return cached
''', expect="孩子表"),
    Cheat("027_radix_match_insert", "match 交出节点自己的 value（别名）", '''
_match = RadixTree.match


def _match_alias(self, ids):
    n, values = _match(self, ids)
    child = self.root.children.get(self._first_page(list(ids)))
    if child is not None and 0 < n == len(child.key):  # 命中正好是一个节点：省一次拷贝
        return n, child.value
    return n, values


RadixTree.match = _match_alias
''', expect="match 要交出新的列表"),
    # ---- 028 锁计数与 LRU 逐出
    Cheat("028_radix_lock_evict", "锁从父节点开始，句柄自己的节点没锁上", '''
_lock = RadixCache.lock


def _lock_from_parent(self, node, unlock=False):
    if node is not self.root:
        _lock(self, node.parent, unlock)


RadixCache.lock = _lock_from_parent
''', expect="自己的节点没锁上"),
    Cheat("028_radix_lock_evict", "先逐出最近用过的叶子", '''
def _evict_newest(self, size):
    if size > self.evictable_size:
        raise ValueError("不够")
    evicted = []
    while len(evicted) < size:
        leaves, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.ref_count == 0:
                leaves.append(node)
        leaf = max(leaves, key=lambda n: n.last_access)
        del leaf.parent.children[tuple(leaf.key[: self.page_size])]
        evicted += leaf.value
        self.evictable_size -= len(leaf.key)
    return evicted


RadixCache.evict = _evict_newest
''', expect="最久没用"),
    Cheat("028_radix_lock_evict", "把 size 当成页数（上游 #80 的反面）", '''
_evict = RadixCache.evict


def _evict_pages(self, size):
    return _evict(self, size // self.page_size)  # 调用者把 token 数当页数传


RadixCache.evict = _evict_pages
''', expect="按 token 计"),
    Cheat("028_radix_lock_evict", "evict 不先查 size（逐出一半才抛错）", '''
def _evict_no_precheck(self, size):
    candidates, stack = [], list(self.root.children.values())
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        if not node.children and node.ref_count == 0:
            candidates.append(node)
    evicted = []
    while len(evicted) < size:  # 候选用完时 min([]) 自己抛 ValueError，可前面的叶子已经走了
        leaf = min(candidates, key=lambda n: n.last_access)
        candidates.remove(leaf)
        parent = leaf.parent
        del parent.children[tuple(leaf.key[: self.page_size])]
        evicted += leaf.value
        self.evictable_size -= len(leaf.key)
        if parent is not self.root and not parent.children and parent.ref_count == 0:
            candidates.append(parent)
    return evicted


RadixCache.evict = _evict_no_precheck
''', expect="出错时什么都不改"),
    Cheat("028_radix_lock_evict", "evict 返回的槽位排了序", '''
_evict_in_order = RadixCache.evict


def _evict_sorted(self, size):
    return sorted(_evict_in_order(self, size))


RadixCache.evict = _evict_sorted
''', expect="按逐出的先后"),
    Cheat("028_radix_lock_evict", "解锁不查计数", '''
def _lock_unchecked(self, node, unlock=False):
    while node is not self.root:
        if unlock:
            node.ref_count -= 1
            if node.ref_count == 0:
                self.protected_size -= len(node.key)
                self.evictable_size += len(node.key)
        else:
            if node.ref_count == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.ref_count += 1
        node = node.parent


RadixCache.lock = _lock_unchecked
''', expect="还没锁就再解锁"),
    # ---- 029 radix 缓存的自检
    Cheat("029_radix_integrity", "只重新数两个总数", '''
def check_integrity(cache):
    evictable = protected = 0
    stack = list(cache.root.children.values())
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        if node.ref_count == 0:
            evictable += len(node.key)
        else:
            protected += len(node.key)
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError("记账不符")
''', expect="孩子们的计数之和"),
    Cheat("029_radix_integrity", "父节点的计数只和最大的孩子比", '''
_check = check_integrity


def check_integrity(cache):
    stack = [cache.root]
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        for child in node.children.values():
            if node is not cache.root and node.ref_count < child.ref_count:
                raise ValueError("孩子的计数比父节点多")
    saved = [(n, n.ref_count) for n in _all(cache)]
    for n, _ in saved:  # 把"之和"那条规矩骗过去：父节点的计数临时抬高到孩子之和
        n.ref_count = max(n.ref_count, sum(c.ref_count for c in n.children.values()))
    try:
        _check(cache)
    finally:
        for n, r in saved:
            n.ref_count = r


def _all(cache):
    out, stack = [], list(cache.root.children.values())
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.children.values())
    return out
''', expect="孩子们的计数之和"),
    Cheat("029_radix_integrity", "不查同一个槽位出现两次", '''
_check = check_integrity


def check_integrity(cache):
    import builtins

    original = builtins.set

    class _Blind(original):  # 让参考答案里的"见过的槽位"永远是空的
        def __contains__(self, item):
            return False

    globals()["set"] = _Blind
    try:
        _check(cache)
    finally:
        del globals()["set"]
''', expect="同一页槽位出现在两个节点里"),
    Cheat("029_radix_integrity", "第 4 条只查页边界、不查连续", '''
def check_integrity(cache):
    ps = cache.page_size
    evictable = protected = 0
    seen = set()
    stack = [cache.root]
    while stack:
        node = stack.pop()
        below = 0
        for first, child in node.children.items():
            if child.parent is not node or len(child.key) != len(child.value):
                raise ValueError("parent 或长度不对")
            if not child.key or len(child.key) % ps or first != tuple(child.key[:ps]):
                raise ValueError("不是整页，或孩子表的键不对")
            for i in range(0, len(child.value), ps):
                page = child.value[i : i + ps]
                if page[0] % ps or len(page) != ps:
                    raise ValueError("不是一整页")
            for slot in child.value:
                if slot in seen:
                    raise ValueError("槽位出现两次")
                seen.add(slot)
            if child.ref_count < 0:
                raise ValueError("锁计数是负数")
            if child.ref_count == 0:
                evictable += len(child.key)
            else:
                protected += len(child.key)
            below += child.ref_count
            stack.append(child)
        if node is not cache.root and node.ref_count < below:
            raise ValueError("父节点的计数小于孩子们之和")
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError("记账不符")
''', expect="后面的槽位却不连续", full=True),
    Cheat("029_radix_integrity", "第 4 条只查连续、不查页边界", '''
def check_integrity(cache):
    ps = cache.page_size
    evictable = protected = 0
    seen = set()
    stack = [cache.root]
    while stack:
        node = stack.pop()
        below = 0
        for first, child in node.children.items():
            if child.parent is not node or len(child.key) != len(child.value):
                raise ValueError("parent 或长度不对")
            if not child.key or len(child.key) % ps or first != tuple(child.key[:ps]):
                raise ValueError("不是整页，或孩子表的键不对")
            for i in range(0, len(child.value), ps):
                page = child.value[i : i + ps]
                if page != list(range(page[0], page[0] + ps)):
                    raise ValueError("不是一整页")
            for slot in child.value:
                if slot in seen:
                    raise ValueError("槽位出现两次")
                seen.add(slot)
            if child.ref_count < 0:
                raise ValueError("锁计数是负数")
            if child.ref_count == 0:
                evictable += len(child.key)
            else:
                protected += len(child.key)
            below += child.ref_count
            stack.append(child)
        if node is not cache.root and node.ref_count < below:
            raise ValueError("父节点的计数小于孩子们之和")
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError("记账不符")
''', expect="不从页边界开始", full=True),
    Cheat("029_radix_integrity", "重复的槽位只和别的节点比（同一个节点里的不查）", '''
def check_integrity(cache):
    ps = cache.page_size
    evictable = protected = 0
    seen = set()
    stack = [cache.root]
    while stack:
        node = stack.pop()
        below = 0
        for first, child in node.children.items():
            if child.parent is not node or len(child.key) != len(child.value):
                raise ValueError("parent 或长度不对")
            if not child.key or len(child.key) % ps or first != tuple(child.key[:ps]):
                raise ValueError("不是整页，或孩子表的键不对")
            for i in range(0, len(child.value), ps):
                page = child.value[i : i + ps]
                if page != list(range(page[0], page[0] + ps)) or page[0] % ps:
                    raise ValueError("不是一整页")
            if seen.intersection(child.value):
                raise ValueError("槽位出现两次")
            seen.update(child.value)
            if child.ref_count < 0:
                raise ValueError("锁计数是负数")
            if child.ref_count == 0:
                evictable += len(child.key)
            else:
                protected += len(child.key)
            below += child.ref_count
            stack.append(child)
        if node is not cache.root and node.ref_count < below:
            raise ValueError("父节点的计数小于孩子们之和")
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError("记账不符")
''', expect="同一个节点里同一页出现了两次", full=True),
    Cheat("029_radix_integrity", "查完顺手摘掉没锁住的叶子（改了树）", '''
_check = check_integrity


def check_integrity(cache):
    _check(cache)
    stack = [cache.root]
    while stack:
        node = stack.pop()
        for first, child in list(node.children.items()):
            if not child.children and child.ref_count == 0:
                del node.children[first]
                cache.evictable_size -= len(child.key)
            else:
                stack.append(child)
''', expect="改动了树"),
    # ---- 030 按 token 预算切分 prefill 队列
    Cheat("030_chunk_queue", "第 7 章的做法：第一个请求比预算长也整段收下", '''
def plan_prefill(input_lens, token_budget, cached_lens=None):
    cached_lens = cached_lens or [0] * len(input_lens)
    if token_budget < 1 or len(cached_lens) != len(input_lens) or any(n < 1 or not 0 <= c < n for n, c in zip(input_lens, cached_lens)):
        raise ValueError("参数不对")
    steps, head = [], 0
    while head < len(input_lens):
        budget, batch = token_budget, []
        while head < len(input_lens) and (not batch or input_lens[head] - cached_lens[head] <= budget):
            batch.append((head, cached_lens[head], input_lens[head]))
            budget -= input_lens[head] - cached_lens[head]
            head += 1
        steps.append(batch)
    return steps
''', expect="超过了预算"),
    Cheat("030_chunk_queue", "被切开的请求排到队尾", '''
from collections import deque
def plan_prefill(input_lens, token_budget, cached_lens=None):
    cached_lens = cached_lens or [0] * len(input_lens)
    if token_budget < 1 or len(cached_lens) != len(input_lens) or any(n < 1 or not 0 <= c < n for n, c in zip(input_lens, cached_lens)):
        raise ValueError("参数不对")
    queue, pos, steps = deque(range(len(input_lens))), list(cached_lens), []
    while queue:
        budget, batch = token_budget, []
        while budget > 0 and queue:
            i = queue.popleft()
            end = min(input_lens[i], pos[i] + budget)
            batch.append((i, pos[i], end)); budget -= end - pos[i]; pos[i] = end
            if end < input_lens[i]:
                queue.append(i)
                break
        steps.append(batch)
    return steps
''', expect="回到队首"),
    Cheat("030_chunk_queue", "不看 cached_lens，从 0 开始算", '''
_orig_plan = plan_prefill
def plan_prefill(input_lens, token_budget, cached_lens=None):
    if cached_lens is not None and len(cached_lens) != len(input_lens):
        raise ValueError("参数不对")
    return _orig_plan(input_lens, token_budget, None)
''', expect="cached_lens"),
    # ---- 031 分块算 prefill 的注意力
    Cheat("031_chunked_attention", "每块都给全部 key，靠掩码挡住后面的", '''
def chunked_attention(q, k, v, chunk, attend):
    n = q.shape[0]
    if k.shape[0] != n or v.shape[0] != n:
        raise ValueError("行数不一样")
    outputs = []
    for s, e in _chunks(n, chunk):
        mask = torch.arange(n)[None, :] <= torch.arange(s, e)[:, None]
        outputs.append(attend(q[s:e], k, v, mask))
    return torch.cat(outputs)
''', expect="后面的 key"),
    Cheat("031_chunked_attention", "左上对齐的掩码（is_causal 的样子）", '''
def chunked_attention(q, k, v, chunk, attend):
    n = q.shape[0]
    if k.shape[0] != n or v.shape[0] != n:
        raise ValueError("行数不一样")
    outputs = []
    for s, e in _chunks(n, chunk):
        mask = torch.ones(e - s, e, dtype=torch.bool).tril()
        outputs.append(attend(q[s:e], k[:e], v[:e], mask))
    return torch.cat(outputs)
''', expect="左上对齐"),
    Cheat("031_chunked_attention", "不分块，一次算完", '''
_orig_chunked = chunked_attention
def chunked_attention(q, k, v, chunk, attend):
    if chunk < 1:
        raise ValueError("chunk 至少是 1")
    return _orig_chunked(q, k, v, max(q.shape[0], 1), attend)
''', expect="一块一块"),
    Cheat("031_chunked_attention", "峰值只看最后一块", '''
def peak_score_elements(n, chunk, num_heads):
    chunks = _chunks(n, chunk)
    s, e = chunks[-1]
    return num_heads * (e - s) * e
''', expect="peak_score_elements"),
    # ---- 032 长提示来了，decode 要等多久
    Cheat("032_decode_stall", "不看 decode_between_chunks，总是 prefill 优先", '''
_orig_simulate = simulate
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    return _orig_simulate(decode_left, prompt_len, token_budget, False, prefill_ms, decode_ms)
''', expect="decode_between_chunks"),
    Cheat("032_decode_stall", "token 按一步开始的时刻到达", '''
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    if prompt_len < 1 or token_budget < 1 or any(n < 1 for n in decode_left):
        raise ValueError("参数不对")
    left, last = list(decode_left), [0.0] * len(decode_left)
    now, pos, max_gap, ttft, steps = 0.0, 0, 0.0, 0.0, []
    while pos < prompt_len or any(left):
        running = [i for i, n in enumerate(left) if n > 0]
        if pos < prompt_len and not (decode_between_chunks and running and steps and steps[-1][0] == "prefill"):
            end = min(pos + token_budget, prompt_len)
            now += prefill_ms(pos, end)
            steps.append(("prefill", pos, end))
            pos = end
            if pos == prompt_len:
                ttft = now
        else:
            start = now
            now += decode_ms(len(running))
            steps.append(("decode", len(running)))
            for i in running:
                max_gap = max(max_gap, start - last[i])   # 按这一步开始的时刻算
                last[i] = start
                left[i] -= 1
    return steps, max_gap, ttft
''', expect="结束时到达"),
    Cheat("032_decode_stall", "每块都按从 0 开始计时（不看块在提示里的位置）", '''
_orig_simulate = simulate
def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    return _orig_simulate(decode_left, prompt_len, token_budget, decode_between_chunks,
                          lambda s, e: prefill_ms(0, e - s), decode_ms)
''', expect="真实位置"),
    # ---- 033 两段流水线的时间
    Cheat("033_pipeline_timeline", "每一步单独取 max，不模拟等待往后传", """
def pipeline_time(prepare, forward, process):
    if not len(prepare) == len(forward) == len(process) or min([*prepare, *forward, *process], default=0) < 0:
        raise ValueError("参数不对")
    normal = sum(prepare) + sum(forward) + sum(process)
    return normal, sum(max(p + r, f) for p, f, r in zip(prepare, forward, process))
""", expect="每一步单独取了 max"),
    Cheat("033_pipeline_timeline", "max(CPU 的和, 前向的和)", """
def pipeline_time(prepare, forward, process):
    if not len(prepare) == len(forward) == len(process) or min([*prepare, *forward, *process], default=0) < 0:
        raise ValueError("参数不对")
    normal = sum(prepare) + sum(forward) + sum(process)
    return normal, max(sum(prepare) + sum(process), sum(forward))
""", expect="max(CPU 的和, 前向的和)"),
    # ---- 034 重叠循环的记账
    Cheat("034_overlap_loop", "按发出的次数判断结束（少生成一个 token）", patched(
        "034_overlap_loop", "if len(outputs[i]) == max_tokens[i] or token == eos_id:",
        "if launched[i] == max_tokens[i] or token == eos_id:"), expect="少了最后一个", full=True),
    Cheat("034_overlap_loop", "结束之后多算的 token 也放进输出", patched(
        "034_overlap_loop", "continue  # 结束之后多算的那一步", "outputs[i].append(token); continue"),
        expect="要丢掉", full=True),
    Cheat("034_overlap_loop", "请求一结束就还行，不管在途的那一批", patched(
        "034_overlap_loop", "for i in [i for i in to_release if i not in in_flight]:",
        "for i in list(to_release):"), expect="还在往这一行写", full=True),
    Cheat("034_overlap_loop", "不重叠：先取上一批的结果，再发出这一批", """
def overlap_generate(prompts, max_tokens, engine, num_rows, eos_id=None):
    n = len(prompts)
    if len(max_tokens) != n or any(m < 1 for m in max_tokens) or num_rows < 1:
        raise ValueError("参数不对")
    outputs, running, waiting, row_of, free = [[] for _ in range(n)], [], list(range(n)), {}, set(range(num_rows))
    while waiting or running:
        batch = [(i, row_of[i]) for i in running]
        while waiting and free:
            i = waiting.pop(0)
            row_of[i] = min(free)
            free.remove(row_of[i])
            running.append(i)
            batch.append((i, row_of[i]))
        for (i, _), token in zip(batch, engine.launch(batch).result()):
            outputs[i].append(token)
            if len(outputs[i]) == max_tokens[i] or token == eos_id:
                running.remove(i)
                free.add(row_of.pop(i))
    return outputs
""", expect="每步先拼批、launch，再取上一批的结果"),
    # ---- 035 CPU 上的流和事件
    Cheat("035_cpu_stream", "用 concurrent.futures 的线程池", """
from concurrent.futures import ThreadPoolExecutor

class CpuEvent:
    def __init__(self, future):
        self.future = future
    def synchronize(self):
        self.future.result()
    def query(self):
        return self.future.done()

class CpuStream:
    def __init__(self):
        self.pool, self.closed = ThreadPoolExecutor(1), False
    def submit(self, fn, *args):
        if self.closed:
            raise RuntimeError("已关闭")
        return CpuEvent(self.pool.submit(fn, *args))
    def synchronize(self):
        self.pool.submit(lambda: None).result()
    def close(self):
        self.closed = True
        self.pool.shutdown(wait=True)
""", expect="concurrent.futures"),
    Cheat("035_cpu_stream", "submit 里当场执行（没有工作线程）", """
class CpuEvent:
    def __init__(self, error=None):
        self.error = error
    def synchronize(self):
        if self.error is not None:
            raise self.error
    def query(self):
        return True

class CpuStream:
    def __init__(self):
        self.closed = False
    def submit(self, fn, *args):
        if self.closed:
            raise RuntimeError("已关闭")
        try:
            fn(*args)
        except BaseException as error:
            return CpuEvent(error)
        return CpuEvent()
    def synchronize(self):
        pass
    def close(self):
        self.closed = True
""", expect="调用 submit 的线程"),
    Cheat("035_cpu_stream", "每个任务一个线程", """
class CpuStream:
    def __init__(self):
        self.closed, self.threads = False, []
    def submit(self, fn, *args):
        if self.closed:
            raise RuntimeError("已关闭")
        event = CpuEvent()
        def work():
            try:
                fn(*args)
            except BaseException as error:
                event._error = error
            finally:
                event._done.set()
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        self.threads.append(thread)
        return event
    def synchronize(self):
        for thread in self.threads:
            thread.join()
    def close(self):
        self.synchronize()
        self.closed = True
"""),
    Cheat("035_cpu_stream", "任务里的异常吞掉，不在 synchronize() 里抛", """
_orig_synchronize = CpuEvent.synchronize
def _quiet(self):
    self._done.wait()
CpuEvent.synchronize = _quiet
""", expect="却没有抛"),
    # ---- 036 类型标签
    Cheat("036_type_tags", "按模块的全局变量找类（白名单形同虚设）", patched(
        "036_type_tags", "if not isinstance(name, str) or name not in classes:",
        "classes = {**globals(), **classes}\n        if not isinstance(name, str) or name not in classes:"),
        expect="应该抛出 ValueError", full=True),
    Cheat("036_type_tags", "嵌套的对象不还原，留成字典", """
def from_wire(classes, data):
    if isinstance(data, dict) and TYPE_KEY in data:
        if data[TYPE_KEY] not in classes:
            raise ValueError("未知的类型标签")
        try:
            return classes[data[TYPE_KEY]](**{k: v for k, v in data.items() if k != TYPE_KEY})
        except TypeError as e:
            raise ValueError(str(e)) from e
    return data
""", expect="from_wire"),
    Cheat("036_type_tags", "tuple 原样保留", patched(
        "036_type_tags", "    if isinstance(obj, (list, tuple)):\n        return [to_wire(v) for v in obj]",
        "    if isinstance(obj, (list, tuple)):\n        return type(obj)(to_wire(v) for v in obj)"),
        expect="tuple 没有变成 list", full=True),
    Cheat("036_type_tags", "普通字典里的类型标签键不检查", patched(
        "036_type_tags", "        if TYPE_KEY in obj:\n", "        if False:\n"), expect="类型标签键", full=True),
    # ---- 037 长度前缀
    Cheat("037_length_prefix", "假设每一块里至少有完整的 4 字节长度", """
class Deframer:
    def __init__(self):
        self._buffer = b""

    def feed(self, chunk):
        done = []
        size = int.from_bytes(chunk[:HEADER], "big") if not self._buffer else None
        self._buffer += chunk
        while len(self._buffer) >= HEADER:
            size = int.from_bytes(self._buffer[:HEADER], "big")
            if len(self._buffer) < HEADER + size:
                break
            done.append(bytes(self._buffer[HEADER:HEADER + size]))
            self._buffer = self._buffer[HEADER + size:]
        if len(self._buffer) < HEADER and done == [] and len(chunk) < HEADER:
            self._buffer = b""  # 半截的长度当成噪声扔掉
        return done

    @property
    def pending(self):
        return len(self._buffer)
""", expect="不对"),
    Cheat("037_length_prefix", "按换行切，不用长度", """
def frame(payloads):
    return b"".join(p + b"\\n" for p in payloads)


class Deframer:
    def __init__(self):
        self._buffer = b""

    def feed(self, chunk):
        self._buffer += chunk
        *done, self._buffer = self._buffer.split(b"\\n")
        return done

    @property
    def pending(self):
        return len(self._buffer)
""", expect="4 字节、大端"),
    Cheat("037_length_prefix", "长度用小端", patched(
        "037_length_prefix", 'out += len(payload).to_bytes(HEADER, "big")',
        'out += len(payload).to_bytes(HEADER, "little")'), expect="大端", full=True),
    # ---- 038 张量的字节
    Cheat("038_tensor_bytes", "bfloat16 先转成 float32 再取字节", """
import numpy as np


def tensor_to_wire(t):
    if t.dim() != 1:
        raise ValueError("只支持一维张量")
    if t.dtype not in _NAMES:
        raise ValueError("不支持的类型")
    array = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return {"dtype": _NAMES[t.dtype], "buffer": array.tobytes()}
""", expect="题目里的 bfloat16 例子"),
    Cheat("038_tensor_bytes", "直接取张量的存储（切片时拿到的是整块内存）", patched(
        "038_tensor_bytes", '"buffer": bytes(as_bytes.tolist())}', '"buffer": bytes(t.untyped_storage())}'),
        expect="buffer", full=True),
    Cheat("038_tensor_bytes", "frombuffer 之后不复制（和 buffer 共用内存）", patched(
        "038_tensor_bytes", "return torch.frombuffer(bytearray(buffer), dtype=dtype).clone()",
        "return torch.frombuffer(buffer, dtype=dtype)"), expect="应该不跟着变", full=True),
    # ---- 039 字节块的增量 UTF-8 解码
    Cheat("039_utf8_chunks", "每块单独解码（半个字变成替换符）", """
def _feed(self, chunk):
    return chunk.decode("utf-8", errors="replace")


Utf8Stream.feed = _feed
""", expect="交出的文字"),
    Cheat("039_utf8_chunks", "全部攒到 finish 再解码", """
def _feed(self, chunk):
    self.buffer += chunk
    return ""


def _finish(self):
    text = bytes(self.buffer).decode("utf-8", errors="replace")
    self.buffer.clear()
    return text


Utf8Stream.feed = _feed
Utf8Stream.finish = _finish
""", expect="交出的文字"),
    Cheat("039_utf8_chunks", "finish 丢掉被截断的半个字", """
def _finish(self):
    self.buffer.clear()
    return ""


Utf8Stream.finish = _finish
""", expect="finish()"),
    Cheat("039_utf8_chunks", "用 codecs 的增量解码器", """
import codecs


class Utf8Stream:
    def __init__(self):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk):
        return self.decoder.decode(chunk)

    @property
    def pending(self):
        return len(self.decoder.getstate()[0])

    def finish(self):
        return self.decoder.decode(b"", final=True)
""", expect="codecs", full=True),
    Cheat("039_utf8_chunks", "躲过名字检查拿 encodings.utf_8 的增量解码器", """
import encodings.utf_8 as u

_Decoder = getattr(u, "Incremental" + "Decoder")


class Utf8Stream:
    def __init__(self):
        self.decoder = _Decoder(errors="replace")

    def feed(self, chunk):
        return self.decoder.decode(chunk)

    @property
    def pending(self):
        return len(self.decoder.getstate()[0])

    def finish(self):
        return self.decoder.decode(b"", final=True) if self.pending else ""
""", expect="不许用", full=True),
    Cheat("039_utf8_chunks", "躲过名字检查用 _codecs.utf_8_decode(final=False)", """
class Utf8Stream:
    def __init__(self):
        self.buffer = b""

    def feed(self, chunk):
        decode = getattr(__import__("_co" + "decs"), "utf_8_decode")
        text, used = decode(self.buffer + chunk, "strict", False)
        self.buffer = (self.buffer + chunk)[used:]
        return text

    @property
    def pending(self):
        return len(self.buffer)

    def finish(self):
        rest, self.buffer = ("\ufffd" if self.buffer else ""), b""
        return rest
""", expect="不许用", full=True),
    # ---- 040 停止串：扣住可能的开头
    Cheat("040_stop_holdback", "只在新来的一段里找停止串（跨段的漏掉）", patched(
        "040_stop_holdback", "hits = [i for i in (self.text.find(s, start) for s in self.stops) if i >= 0]",
        "hits = [len(self.text) - len(piece) + i for i in (piece.find(s) for s in self.stops) if i >= 0]"),
        expect="feed", full=True),
    Cheat("040_stop_holdback", "总是扣住最长停止串减一个字符（扣得太多）", patched(
        "040_stop_holdback", "self.sent = len(self.text) - self._held()",
        "self.sent = max(self.sent, len(self.text) - (max(map(len, self.stops)) - 1))"),
        expect="feed", full=True),
    Cheat("040_stop_holdback", "按停止串的顺序取第一个命中的，不是最早的位置", patched(
        "040_stop_holdback", "self.sent = min(hits)", "self.sent = hits[0]"), expect="feed", full=True),
    Cheat("040_stop_holdback", "finish 不放出扣住的文字", """
StopFilter.finish = lambda self: ""
""", expect="finish()"),
    # ---- 041 窗口反分词：两个偏移，只增不减
    Cheat("041_window_detok", "每次都解码全部 token（平方代价）", """
class IncrementalDecoder:
    def __init__(self, decode):
        self.decode, self.ids, self.sent = decode, [], 0

    def push(self, ids):
        self.ids += ids
        stable = self.decode(self.ids).rstrip("\ufffd")
        out, self.sent = stable[self.sent:], len(stable)
        return out

    def flush(self):
        text = self.decode(self.ids)
        out, self.sent = text[self.sent:], len(text)
        return out
""", expect="不要每次都解码全部", full=True),
    Cheat("041_window_detok", "每次都解码全部 token，再把计数清零", """
class IncrementalDecoder:
    def __init__(self, decode):
        self.decode, self.ids, self.sent = decode, [], 0

    def push(self, ids):
        self.ids += ids
        stable = self.decode(self.ids).rstrip("\ufffd")
        if hasattr(self.decode, "tokens"):
            self.decode.tokens = 0
        out, self.sent = stable[self.sent:], len(stable)
        return out

    def flush(self):
        text = self.decode(self.ids)
        out, self.sent = text[self.sent:], len(text)
        return out
""", expect="不要每次都解码全部", full=True),
    Cheat("041_window_detok", "从 decode 身上找不计数的参照 decode，每次解码全部", """
def _uncounted(decode):
    for f in (decode, getattr(type(decode), "__call__", None)):
        found = getattr(f, "__globals__", {}).get("reference_decode")
        if found is not None:
            return found
    return decode


class IncrementalDecoder:
    def __init__(self, decode):
        self.decode, self.ids, self.sent = _uncounted(decode), [], 0

    def push(self, ids):
        self.ids += ids
        stable = self.decode(self.ids).rstrip("\ufffd")
        out, self.sent = stable[self.sent:], len(stable)
        return out

    def flush(self):
        text = self.decode(self.ids)
        out, self.sent = text[self.sent:], len(text)
        return out
""", expect="不要每次都解码全部", full=True),
    Cheat("041_window_detok", "窗口不留上下文（开头的空格被吃掉）", patched(
        "041_window_detok", "prefix = self.decode(self.ids[self.surr_offset:self.read_offset])\n"
        "        full = self.decode(self.ids[self.surr_offset:])",
        "prefix = \"\"\n        full = self.decode(self.ids[self.read_offset:])"), expect="push", full=True),
    Cheat("041_window_detok", "只在提交时发（稳定的字不先发）", patched(
        "041_window_detok", "stable = new.rstrip(REPLACEMENT)", "stable = \"\""), expect="尽早", full=True),
    Cheat("041_window_detok", "上游的可打印规矩（已发的字数会往回退）", patched(
        "041_window_detok", """        stable = new.rstrip(REPLACEMENT)
        out = stable[self.sent_pending:]
        self.sent_pending = max(self.sent_pending, len(stable))""", """        printable = _printable(new)
        out = printable[self.sent_pending:]
        self.sent_pending = len(printable)""") + """

def _printable(text):
    cjk = lambda ch: "\u4e00" <= ch <= "\u9fff"
    if text.endswith("\\n") or (text and cjk(text[-1])):
        return text
    if len(text) > 1 and cjk(text[-2]):
        return text[:-1]
    return text[:text.rfind(" ") + 1]
""", expect="尽早", full=True),
    # ---- 042 消息分派
    Cheat("042_dispatch_msgs", "退出之后接着处理，最后才返回 False", """
def dispatch(msgs, add_req, abort_req):
    rejects, running = [], True
    def one(msg):
        nonlocal running
        if msg[0] == "batch":
            for m in msg[1]:
                one(m)
        elif msg[0] == "exit":
            running = False
        elif msg[0] == "user":
            try:
                add_req(msg[1], msg[2])
            except ValueError as e:
                rejects.append((msg[1], str(e)))
        elif msg[0] == "abort":
            abort_req(msg[1])
        else:
            raise TypeError(msg[0])
    for m in msgs:
        one(m)
    return rejects, running
""", expect="退出之后还在处理消息"),
    Cheat("042_dispatch_msgs", "什么异常都当成拒绝", patched(
        "042_dispatch_msgs", "except ValueError as e:", "except Exception as e:"),
        expect="应该抛出 SchedulerBug", full=True),
    Cheat("042_dispatch_msgs", "只在最外层检查消息类型，包里不认识的悄悄跳过", """
def dispatch(msgs, add_req, abort_req):
    # cheat: TypeError only at top level; unknown kinds inside batches silently ignored
    for m in msgs:
        if m[0] not in ("user", "abort", "exit", "batch"): raise TypeError(m[0])
    rejects = []
    def one(m):
        if m[0] == "batch": return all(one(x) for x in m[1])
        if m[0] == "exit": return False
        if m[0] == "user":
            try: add_req(m[1], m[2])
            except ValueError as e: rejects.append((m[1], str(e)))
        elif m[0] == "abort": abort_req(m[1])
        return True
    return rejects, all(one(m) for m in msgs)
""", expect="包里嵌套的不认识的消息", full=True),
    # ---- 043 按条数对齐
    Cheat("043_count_agreement", "其他 rank 有多少取多少（不按广播的条数）", patched(
        "043_count_agreement", "    count = broadcast(0)\n    return first + [sub.get() for _ in range(count)]",
        "    broadcast(0)\n    return first + sub.poll()"), expect="同一步收到的消息必须相同", full=True),
    Cheat("043_count_agreement", "阻塞等到的第一条也算进广播的条数", patched(
        "043_count_agreement", "broadcast(len(rest))", "broadcast(len(first + rest))"),
        expect="同一步收到的消息必须相同", full=True),
    Cheat("043_count_agreement", "空闲的 rank ≥ 1 先进广播，第一条也计数", """
def receive(rank, blocking, inbox, pub, sub, broadcast):
    # cheat: first message counted; idle ranks wait inside the collective
    if rank == 0:
        msgs = ([inbox.wait()] if blocking else []) + inbox.poll()
        for m in msgs: pub.put(m)
        broadcast(len(msgs))
        return msgs
    n = broadcast(0)
    return [sub.get() for _ in range(n)]
""", expect="就进了 broadcast", full=True),
    Cheat("043_count_agreement", "空闲的 rank ≥ 1 先进广播，再等第一条", """
def receive(rank, blocking, inbox, pub, sub, broadcast):
    if rank == 0:
        first = [inbox.wait()] if blocking else []
        rest = inbox.poll()
        for m in first + rest: pub.put(m)
        broadcast(len(rest))
        return first + rest
    n = broadcast(0)   # idle rank waits in the collective, not on sub
    first = [sub.get()] if blocking else []
    return first + [sub.get() for _ in range(n)]
""", expect="就进了 broadcast", full=True),
    # ---- 044 握手
    Cheat("044_late_subscriber", "只睡 50 ms，不确认订阅生效", """
import time

def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(0.05)
    all_reduce_min(1)
""", full=True, expect="订阅还没生效"),
    Cheat("044_late_subscriber", "不读掉晚到的探针", patched(
        "044_late_subscriber", "        while sub.get() != READY:  # 读掉晚到的探针\n            pass",
        "        pass"), expect="不是真消息", full=True),
    Cheat("044_late_subscriber", "固定睡 0.35 秒", """
import time
def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(0.35)   # fixed sleep > judge's max join delay (0.3 s)
    all_reduce_min(1)
""", expect="订阅还没生效", full=True),
    Cheat("044_late_subscriber", "固定睡 2 秒", """
import time
def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(2.0)   # fixed sleep > judge's max join delay (0.3 s)
    all_reduce_min(1)
""", expect="握手才返回", full=True),
    Cheat("044_late_subscriber", "不发“准备好了”，只读掉已经到了的探针", """
import time
def handshake(rank, pub, sub, all_reduce_min):
    heard = rank == 0
    while True:
        if rank == 0:
            pub.put(b"\\x00p")
        elif not heard:
            time.sleep(0.002); heard = not sub.empty()
        if all_reduce_min(int(heard)) == 1:
            break
    if rank != 0:
        while not sub.empty():   # drain probes without a READY frame
            sub.get()
""", expect="不是真消息", full=True),

    # ---- 045 SSE
    Cheat("045_sse_stream", "每一块收到就解码（一个汉字的 UTF-8 字节被切开）", """
class SSEParser:
    def __init__(self):
        self._text = ""
        self._data = []

    def feed(self, chunk):
        self._text += chunk.decode("utf-8", errors="replace")
        events = []
        while "\\n" in self._text:
            line, self._text = self._text.split("\\n", 1)
            line = line.removesuffix("\\r")
            if line == "":
                if self._data:
                    text = "\\n".join(self._data)
                    events.append(DONE if text == DONE else _json_or_text(text))
                self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
        return events
""", expect="不对"),
    Cheat("045_sse_stream", "按两个 \\n 切事件（不认 \\r\\n）", """
class SSEParser:
    def __init__(self):
        self._buffer = b""

    def feed(self, chunk):
        self._buffer += chunk
        *done, self._buffer = self._buffer.split(b"\\n\\n")
        events = []
        for raw in done:
            lines = [l[5:].removeprefix(" ") for l in raw.decode().split("\\n") if l.startswith("data:")]
            if lines:
                text = "\\n".join(lines)
                events.append(DONE if text == DONE else json.loads(text))
        return events
""", expect="\\r\\n"),
    # 评审找到的：全部 JSON 的事件里，去掉几个空格、怎么连接多行都看不出来
    Cheat("045_sse_stream", "data 行去掉所有空白、多行直接拼起来", patched(
        "045_sse_stream", "                    text = \"\\n\".join(self._data)\n",
        "                    text = \"\".join(self._data)\n").replace(
        "self._data.append(value[1:] if value.startswith(\" \") else value)",
        "self._data.append(value.strip())"), expect="不对", full=True),
    Cheat("045_sse_stream", "json.dumps 用默认的 ensure_ascii（中文变成 \\uXXXX）", patched(
        "045_sse_stream", "text = json.dumps(payload, ensure_ascii=False)", "text = json.dumps(payload)"),
        expect="ensure_ascii", full=True),
    # ---- 046 请求参数
    Cheat("046_request_validation", "true 当成整数 1（isinstance(True, int)）", patched(
        "046_request_validation", "    return isinstance(x, int) and not isinstance(x, bool)\n",
        "    return isinstance(x, int)\n"), expect="坏请求没有被拦住", full=True),
    Cheat("046_request_validation", "不认识的字段悄悄忽略", patched(
        "046_request_validation", "    unknown = sorted(set(body) - set(FIELDS))\n", "    unknown = []\n"),
        expect="param", full=True),
    Cheat("046_request_validation", "字符串的数字也收下", patched(
        "046_request_validation",
        "    temperature = body.get(\"temperature\", 1.0)\n",
        "    temperature = body.get(\"temperature\", 1.0)\n"
        "    if isinstance(temperature, str):\n        temperature = float(temperature)\n"),
        expect="坏请求没有被拦住", full=True),
    # ---- 047 回复路由
    Cheat("047_reply_router", "所有 uid 共用一个队列", """
class ReplyRouter:
    def __init__(self):
        self._queue = asyncio.Queue()
        self._open = set()
        self._next_uid = 0
        self._failed = None

    def open(self):
        if self._failed is not None:
            raise BackendGone(self._failed)
        uid = self._next_uid
        self._next_uid += 1
        self._open.add(uid)
        return uid

    def deliver(self, uid, piece, finished):
        if uid in self._open:
            self._queue.put_nowait((uid, piece, finished))

    async def next(self, uid):
        item = await self._queue.get()
        if item == "gone":
            self._open.discard(uid)
            raise BackendGone(self._failed)
        if item[2]:
            self._open.discard(uid)
        return item[1], item[2]

    def abort(self, uid):
        if uid in self._open:
            self._open.discard(uid)
            return True
        return False

    def fail(self, reason):
        self._failed = reason
        for _ in self._open:
            self._queue.put_nowait("gone")

    @property
    def open_uids(self):
        return set(self._open)
""", expect="next(a) 不对"),
    Cheat("047_reply_router", "fail 只记下原因，不叫醒正在等的协程", patched(
        "047_reply_router", "        for queue in self._queues.values():\n            queue.put_nowait(_Gone(reason))\n",
        "        pass\n"), expect="挂住了", full=True),
    Cheat("047_reply_router", "abort 不注销 uid", patched(
        "047_reply_router", "        return self._queues.pop(uid, None) is not None\n",
        "        return uid in self._queues\n"), expect="open_uids", full=True),
    # 评审找到的：轮询的 next、不叫醒任何人的 fail、给未知 uid 的回复攒在 defaultdict 里
    Cheat("047_reply_router", "next 每 20 ms 轮询一次，fail 不叫醒任何人", """
import asyncio
from collections import defaultdict, deque


class BackendGone(Exception):
    pass


class ReplyRouter:
    def __init__(self):
        self._pieces = defaultdict(deque)
        self._open = set()
        self._next_uid = 0
        self._failed = None

    def open(self):
        if self._failed is not None:
            raise BackendGone(self._failed)
        uid = self._next_uid
        self._next_uid += 1
        self._open.add(uid)
        return uid

    def deliver(self, uid, piece, finished):
        if uid in self._open:
            self._pieces[uid].append((piece, finished))

    async def next(self, uid):
        while not self._pieces[uid]:
            if self._failed is not None:
                self._open.discard(uid)
                raise BackendGone(self._failed)
            await asyncio.sleep(0.02)
        item = self._pieces[uid].popleft()
        if item[1]:
            self._open.discard(uid)
        return item

    def abort(self, uid):
        if uid in self._open:
            self._open.discard(uid)
            return True
        return False

    def fail(self, reason):
        self._failed = reason

    @property
    def open_uids(self):
        return set(self._open)
""", full=True, expect="还在等"),
    Cheat("047_reply_router", "给未知 uid 的回复攒在 defaultdict 里，open 时交给新 uid", patched(
        "047_reply_router", "        self._queues[uid] = asyncio.Queue()\n",
        "        self._queues[uid] = STALE.pop(uid, None) or asyncio.Queue()\n").replace(
        "        queue = self._queues.get(uid)\n",
        "        queue = self._queues.get(uid) or STALE[uid]\n") + """
from collections import defaultdict

STALE = defaultdict(asyncio.Queue)
""", expect="直接丢掉", full=True),
]


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.id)
def test_cheat_is_rejected(cheat, tmp_path):
    source = cheat.code if cheat.full else solution(cheat.exercise) + "\n\n# ---- 作弊 ----\n" + cheat.code
    result = judge(cheat.exercise, source, tmp_path)
    assert result["verdict"] == "failed", (
        f"{cheat.exercise} 的测试没有拒绝作弊答案「{cheat.name}」：结论是 {result['verdict']}"
        f"（{result.get('message', '')}）"
    )
    assert cheat.expect in result["message"], (
        f"「{cheat.name}」被判错了，但理由不对（判词里应当有「{cheat.expect}」）：\n{result['message']}"
    )


def test_every_exercise_has_a_cheat():
    exercises = sorted(p.name for p in PRACTICE.iterdir() if (p / "test.py").is_file())
    covered = {c.exercise for c in CHEATS}
    assert set(exercises) <= covered, f"没有作弊答案的练习：{sorted(set(exercises) - covered)}"


# ---------------------------------------------------------------- 能推广到每道题的检查


def public_functions(exercise: str) -> list[str]:
    tree = ast.parse(solution(exercise))
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


STUBS = [(ex.name, fn) for ex in sorted(PRACTICE.iterdir()) if (ex / "solution.py").is_file()
         for fn in public_functions(ex.name)]


@pytest.mark.parametrize("exercise,function", STUBS, ids=[f"{e[:3]}-{f}" for e, f in STUBS])
def test_every_public_function_is_tested(exercise, function, tmp_path):
    """参考答案里任何一个公开函数没写（raise NotImplementedError），测试都要判“未通过”。"""
    stub = f"\n\ndef {function}(*args, **kwargs):\n    raise NotImplementedError\n"
    result = judge(exercise, solution(exercise) + stub, tmp_path)
    assert result["verdict"] == "failed", (
        f"{exercise}：{function} 换成 raise NotImplementedError 以后，测试的结论是 {result['verdict']}："
        "测试没有调用到它"
    )
