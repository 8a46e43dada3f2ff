"""采样器：从每个请求最后一个位置的 logits 里挑出下一个 token。

一批里的请求各有各的采样参数：有的贪心，有的 temperature=0.7、top_p=0.9。
先把它们整理成几列张量（prepare），再对整批一次算完（sample），不逐个请求循环。

三样 OpenAI 客户端常用的东西也在这里算：
- seed：带 seed 的请求每一步用自己的随机数（由 seed 和"这是第几个生成的 token"决定），
  和同一批里还有谁、批怎么拼无关；
- presence / frequency 惩罚：按这个请求已经生成的 token 计数，计数表在设备上，按页表的行存，
  采样之后在设备上累加（和 token 池一样，不必等新 token 回到 CPU）；
- logprobs：原始 logits（惩罚和温度之前）的 log_softmax，取采样出的 token 和概率最大的几个。
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch

from minisgl.core import Batch, Req
from minisgl.utils import to_device

_MASK64 = (1 << 64) - 1


@dataclass
class BatchPenalties:
    """一批里带惩罚的请求（P 个）。"""

    rows: torch.Tensor  # int64 [P]：在批里是第几个请求
    table_rows: torch.Tensor  # int64 [P]：在页表里的行，也是它在计数表里的行
    fresh_rows: torch.Tensor  # int64：这一步是第一个生成 token 的请求的行，计数先清零
    presence: torch.Tensor  # float [P]
    frequency: torch.Tensor  # float [P]


@dataclass
class BatchLogprobs:
    """一批的 log 概率，由 sample() 填进来。top_* 的列数是这一批要得最多的那个 top_logprobs。"""

    token_logprobs: torch.Tensor  # float32 [B]：采样出的那个 token
    top_ids: torch.Tensor  # int32 [B, K]
    top_logprobs: torch.Tensor  # float32 [B, K]，从大到小

    def to(self, device: str, non_blocking: bool = False) -> BatchLogprobs:
        return BatchLogprobs(*(t.to(device, non_blocking=non_blocking) for t in
                               (self.token_logprobs, self.top_ids, self.top_logprobs)))


class TokenLogprobs(NamedTuple):
    """一个请求这一步的 log 概率（CPU 上的 Python 值），调度器把它随新 token 一起交出去。"""

    logprob: float
    top_ids: list[int]
    top_logprobs: list[float]


@dataclass
class BatchSamplingArgs:
    """一批请求的采样参数，每个张量一行对应一个请求。all_greedy 时 greedy … top_p 都是 None。"""

    all_greedy: bool
    greedy: torch.Tensor | None = None  # bool [B]：这一行直接取 argmax
    temperatures: torch.Tensor | None = None  # float [B]，贪心行填 1（不会用到）
    top_k: torch.Tensor | None = None  # int [B]，不限制时填词表大小
    top_p: torch.Tensor | None = None  # float [B]
    seeds: list[tuple[int, int]] | None = None  # (批里第几个, 这一步的种子)：带 seed 的采样行
    penalties: BatchPenalties | None = None  # 没有请求带惩罚时为 None
    logprobs: BatchLogprobs | None = None  # 没有请求要 logprobs 时为 None


class Sampler:
    def __init__(self, device: torch.device, vocab_size: int, seed: int = 0,
                 max_running_req: int = 256) -> None:
        self.device, self.vocab_size = device, vocab_size
        # 自己的随机数发生器：采样结果只取决于种子和调用顺序，不受别处 torch.manual_seed 影响
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.num_rows = max_running_req + 1  # 页表的行数（含占位行）
        # 每行一个请求、每列一个 token 的生成次数；第一个带惩罚的请求来了才分配
        self.counts: torch.Tensor | None = None

    def prepare(self, batch: Batch) -> BatchSamplingArgs:
        reqs = batch.reqs
        params = [req.sampling_params for req in reqs]
        penalties = self._prepare_penalties(reqs)
        logprobs = self._prepare_logprobs(reqs)
        if penalties is None and all(p.is_greedy for p in params):
            # 最常见的情况：整批 argmax，什么都不用准备
            return BatchSamplingArgs(all_greedy=True, logprobs=logprobs)
        def column(values: list, dtype: torch.dtype) -> torch.Tensor:  # GPU 上异步拷，CPU 不等
            return to_device(values, dtype, self.device)

        return BatchSamplingArgs(
            all_greedy=False,
            greedy=column([p.is_greedy for p in params], torch.bool),
            temperatures=column([1.0 if p.is_greedy else p.temperature for p in params],
                                torch.float32),
            top_k=column([self.vocab_size if p.top_k == -1 else min(p.top_k, self.vocab_size)
                          for p in params], torch.int64),
            top_p=column([p.top_p for p in params], torch.float32),
            seeds=[(i, step_seed(r.sampling_params.seed, num_generated(r)))
                   for i, r in enumerate(reqs)
                   if r.sampling_params.seed is not None and not r.sampling_params.is_greedy],
            penalties=penalties,
            logprobs=logprobs,
        )

    def _prepare_penalties(self, reqs: list[Req]) -> BatchPenalties | None:
        rows = [i for i, r in enumerate(reqs) if r.sampling_params.has_penalty]
        if not rows:
            return None
        if self.counts is None:
            self.counts = torch.zeros(self.num_rows, self.vocab_size, dtype=torch.int32,
                                      device=self.device)
        picked = [reqs[i] for i in rows]
        col = lambda values, dtype: to_device(values, dtype, self.device)  # noqa: E731
        return BatchPenalties(
            rows=col(rows, torch.int64),
            table_rows=col([r.table_idx for r in picked], torch.int64),
            # 行是会被下一个请求重用的：第一个 token 之前，把上一个请求留下的计数清掉
            fresh_rows=col([r.table_idx for r in picked if num_generated(r) == 0], torch.int64),
            presence=col([r.sampling_params.presence_penalty for r in picked], torch.float32),
            frequency=col([r.sampling_params.frequency_penalty for r in picked], torch.float32),
        )

    def _prepare_logprobs(self, reqs: list[Req]) -> BatchLogprobs | None:
        if not any(r.sampling_params.logprobs for r in reqs):
            return None
        k = max(r.sampling_params.top_logprobs for r in reqs)
        b, dev = len(reqs), self.device
        # 先占好位置，sample() 把结果写进来：重叠调度时它在工作线程上、晚一些才算
        return BatchLogprobs(torch.empty(b, device=dev),
                             torch.empty(b, k, dtype=torch.int32, device=dev),
                             torch.empty(b, k, device=dev))

    def sample(self, logits: torch.Tensor, args: BatchSamplingArgs) -> torch.Tensor:
        """logits: [B, vocab] → 下一个 token，int32 [B]。要 logprobs 时顺便填好 args.logprobs。"""
        raw = logits
        if args.penalties is not None:
            logits = self._apply_penalties(logits, args.penalties)
        if args.all_greedy:
            tokens = logits.argmax(dim=-1).to(torch.int32)
        else:
            tokens = self._sample(logits, args)
        if args.penalties is not None:  # 排在这一步之后的采样看得到这个 token
            pen = args.penalties
            assert self.counts is not None
            self.counts.index_put_((pen.table_rows, tokens[pen.rows].long()),
                                   torch.ones_like(pen.table_rows, dtype=torch.int32),
                                   accumulate=True)
        if args.logprobs is not None:
            _fill_logprobs(raw, tokens, args.logprobs)
        return tokens

    def _apply_penalties(self, logits: torch.Tensor, pen: BatchPenalties) -> torch.Tensor:
        assert self.counts is not None
        self.counts.index_fill_(0, pen.fresh_rows, 0)
        counts = self.counts[pen.table_rows].float()  # [P, vocab]
        delta = pen.frequency[:, None] * counts + pen.presence[:, None] * (counts > 0).float()
        out = logits.float().clone()
        out[pen.rows] -= delta
        return out

    def _sample(self, logits: torch.Tensor, args: BatchSamplingArgs) -> torch.Tensor:
        assert args.temperatures is not None and args.top_k is not None and args.top_p is not None
        # 降序排一次，top-k 和 top-p 都在排好的序列上做
        # stable=True：并列的 token 按 id 从小到大排，同样的输入总是同样的结果
        scaled = logits.float() / args.temperatures[:, None]
        sorted_logits, order = scaled.sort(dim=-1, descending=True, stable=True)
        rank = torch.arange(logits.shape[-1], device=logits.device)
        # 只留前 k 名
        sorted_logits.masked_fill_(rank[None, :] >= args.top_k[:, None], float("-inf"))
        probs = sorted_logits.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # 排在这个 token 前面的概率总和
        # 前面已经凑够 p 了，这个 token 不要；第 1 名前面是 0，总能留下。
        # top_p = 1 表示不限制：浮点累加可能在末尾"凑够 1"，不能因此误删长尾
        probs.masked_fill_((mass_before >= args.top_p[:, None]) & (args.top_p[:, None] < 1.0), 0.0)
        # 按 probs 的比例抽一个名次（不必归一化）：argmax(p / q)，q 服从指数分布。
        # 与 torch.multinomial(probs, 1) 同一个算法、同样的随机数，但 multinomial 先把
        # "分布是否合法"读回 CPU 检查，在 GPU 上是一次同步；这里什么都不读回
        q = torch.empty_like(probs).exponential_(generator=self.generator)
        for row, seed in args.seeds or ():  # 带 seed 的行换成它自己的随机数
            own = torch.Generator(device=probs.device).manual_seed(seed)
            q[row].exponential_(generator=own)
        choice = (probs / q).argmax(dim=-1, keepdim=True)
        sampled = order.gather(-1, choice).squeeze(-1)
        return torch.where(args.greedy, logits.argmax(dim=-1), sampled).to(torch.int32)


def _fill_logprobs(logits: torch.Tensor, tokens: torch.Tensor, out: BatchLogprobs) -> None:
    logprobs = logits.float().log_softmax(dim=-1)
    out.token_logprobs.copy_(logprobs.gather(-1, tokens.long()[:, None]).squeeze(-1))
    k = out.top_ids.shape[1]
    if k > 0:
        values, ids = logprobs.topk(k, dim=-1)
        out.top_logprobs.copy_(values)
        out.top_ids.copy_(ids)


def num_generated(req: Req) -> int:
    """这个请求已经生成了几个 token（prepare 时，也就是这一步要生成第几个，从 0 数）。"""
    prompt_len = req.max_device_len - req.output_len
    return req.device_len - prompt_len


def step_seed(seed: int, step: int) -> int:
    """请求的 seed 和第几个 token → 这一步的随机数种子（splitmix64 的混合）。

    只看这两个数，所以一个请求的随机数和批里还有谁、第几步进的批、重叠调度开没开都无关；
    seed 与 seed+1 的各步种子也不会错位重合（n 个回答用 seed+i 时彼此独立）。
    """
    z = (seed + (step + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 1  # 63 位：manual_seed 收非负的 int64


def logprobs_per_req(logprobs: BatchLogprobs | None, reqs: Sequence[Req]
                     ) -> list[TokenLogprobs | None]:
    """把一批的 log 概率（已在 CPU 上）拆给每个请求；没要 logprobs 的请求得到 None。"""
    if logprobs is None:
        return [None] * len(reqs)
    chosen = logprobs.token_logprobs.tolist()
    top_ids, top_values = logprobs.top_ids.tolist(), logprobs.top_logprobs.tolist()
    out: list[TokenLogprobs | None] = []
    for i, req in enumerate(reqs):
        p = req.sampling_params
        k = p.top_logprobs
        out.append(TokenLogprobs(chosen[i], top_ids[i][:k], top_values[i][:k])
                   if p.logprobs else None)
    return out
