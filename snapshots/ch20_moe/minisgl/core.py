"""引擎里流动的核心数据：采样参数、请求、批次，以及前向时的全局上下文。

- SamplingParams：一个请求"怎么挑下一个 token"、"最多生成多少"，要不要报告 log 概率。
- Req：调度器眼里的一个请求，核心是几条长度记账（cached_len、device_len ……）。
- Batch：一次前向要算的一组请求，prefill 或 decode。
- Context：一个进程里唯一的运行上下文；前向期间通过它拿到当前批次，
  模型各层因此不必把 batch 一层层当参数往下传。

用户亲手传进来的值（SamplingParams、构造 Req 的参数）在这里检查并给出中文报错；
引擎内部的不变量只用 assert。
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Literal

import torch

if TYPE_CHECKING:  # 只用于类型标注、运行时不导入：core 不依赖任何别的 minisgl 模块
    from minisgl.attention import BaseAttnBackend, BaseAttnMetadata
    from minisgl.kvcache import BaseCacheHandle
    from minisgl.moe import BaseMoeBackend


def _require(ok: bool, rule: str, got: object) -> None:
    if not ok:
        raise ValueError(f"{rule}，收到 {got!r}")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


GREEDY_TEMPERATURE = 1e-5  # 温度低于它按贪心处理（和 vLLM 一样）：logits / 1e-40 会溢出成 inf
MAX_TOP_LOGPROBS = 20  # 每个位置最多报告多少个候选 token 的 log 概率（OpenAI 的上限）
SEED_RANGE = (-(2**63), 2**63)  # seed 取 int64 的范围：torch.Generator 能接受，msgpack 也能编


@dataclass
class SamplingParams:
    """一个请求的采样参数。默认值就是贪心解码、最多生成 1024 个 token。"""

    temperature: float = 0.0  # 0 表示贪心：直接取概率最大的 token
    top_k: int = -1  # 只在概率最大的 k 个 token 里采样；-1 表示不限制
    top_p: float = 1.0  # 只在累计概率达到 p 的最小集合里采样；1.0 表示不限制
    ignore_eos: bool = False  # True 时生成到 EOS 也不停，一直到 max_tokens
    max_tokens: int = 1024  # 最多生成多少个新 token
    seed: int | None = None  # 给了就用这个请求自己的随机数：同样的 seed、同样的提示，同样的输出
    # OpenAI 的两种惩罚：已生成的 token 的 logit 减去 presence（出现过）+ frequency × 出现次数
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: bool = False  # 报告采样出的 token 的 log 概率
    top_logprobs: int = 0  # 同时报告概率最大的几个 token（要 logprobs=True）

    def __post_init__(self) -> None:
        # 坏参数在进入引擎之前拦住：temperature<0 或 top_p=0 到了采样器里只会变成 nan
        t, k, p = self.temperature, self.top_k, self.top_p
        real = _is_int(t) or isinstance(t, float)
        _require(real and math.isfinite(t) and t >= 0, "temperature 必须是 ≥ 0 的有限实数", t)
        _require(_is_int(k) and (k == -1 or k >= 1), "top_k 必须是 -1（不限制）或 ≥ 1 的整数", k)
        _require(isinstance(p, (int, float)) and 0 < p <= 1, "top_p 必须在 (0, 1] 之间", p)
        _require(isinstance(self.ignore_eos, bool), "ignore_eos 必须是 True 或 False",
                 self.ignore_eos)
        _require(_is_int(self.max_tokens) and self.max_tokens >= 1,
                 "max_tokens 必须是 ≥ 1 的整数", self.max_tokens)
        s = self.seed
        _require(s is None or (_is_int(s) and SEED_RANGE[0] <= s < SEED_RANGE[1]),
                 "seed 必须是 None 或 int64 范围内的整数", s)
        for name in ("presence_penalty", "frequency_penalty"):
            v = getattr(self, name)
            ok = (_is_int(v) or isinstance(v, float)) and -2 <= v <= 2
            _require(ok, f"{name} 必须是 [-2, 2] 之间的实数", v)
        _require(isinstance(self.logprobs, bool), "logprobs 必须是 True 或 False", self.logprobs)
        n = self.top_logprobs
        _require(_is_int(n) and 0 <= n <= MAX_TOP_LOGPROBS,
                 f"top_logprobs 必须是 0 到 {MAX_TOP_LOGPROBS} 之间的整数", n)
        _require(self.logprobs or n == 0, "top_logprobs 大于 0 时 logprobs 必须为 True", n)

    @property
    def is_greedy(self) -> bool:
        """结果是否与"每步取 argmax"相同：温度（几乎）为 0，或者只在第 1 名里"采样"。"""
        return self.temperature < GREEDY_TEMPERATURE or self.top_k == 1

    @property
    def has_penalty(self) -> bool:
        return self.presence_penalty != 0 or self.frequency_penalty != 0


@dataclass(eq=False, kw_only=True)  # eq=False：按对象身份比较和哈希，请求可以放进 set
class Req:
    """调度器眼里的一个请求。

    一个请求的 token 序列按下标分成三段（都是左闭右开）::

        [0, cached_len)                K/V 已经在 KV 池里
        [cached_len, device_len)       这一步前向要算的 token，共 extend_len 个
        [device_len, max_device_len)   还能再生成的名额，共 remain_len 个

    每发出一步前向调用一次 complete_one()，于是 decode 时 extend_len 恒为 1。
    """

    input_ids: torch.Tensor  # CPU 上的 int32 一维张量：提示 + 已经拿回 CPU 的生成结果
    table_idx: int  # 在页表里占的行号
    cached_len: int  # 前缀缓存命中的长度（没命中就是 0）
    output_len: int  # 最多生成多少个 token（通常就是 sampling_params.max_tokens）
    uid: int  # 请求的全局编号，前端靠它把结果送回对应的用户
    sampling_params: SamplingParams
    cache_handle: BaseCacheHandle | None  # 前缀缓存里命中部分的句柄

    device_len: int = field(init=False)  # 设备上已知的 token 数（提示 + 已生成）
    max_device_len: int = field(init=False)  # 提示长度 + output_len，序列长度的上限

    def __post_init__(self) -> None:
        ids = self.input_ids
        ok = isinstance(ids, torch.Tensor) and ids.dim() == 1 and ids.dtype == torch.int32
        got = f"{ids.device} 上形状 {tuple(ids.shape)} 的 {ids.dtype}" if isinstance(
            ids, torch.Tensor) else type(ids).__name__
        _require(ok and ids.is_cpu, "input_ids 必须是 CPU 上的一维 int32 张量", got)
        _require(_is_int(self.output_len) and self.output_len >= 1,
                 "output_len 必须是 ≥ 1 的整数", self.output_len)
        # 至少留 1 个 token 给这一步去算：最后一个位置的 logits 才能给出下一个 token
        _require(_is_int(self.cached_len) and 0 <= self.cached_len < len(ids),
                 f"cached_len 必须满足 0 ≤ cached_len < 输入长度 {len(ids)}", self.cached_len)
        self.device_len = len(ids)
        self.max_device_len = len(ids) + self.output_len

    @property
    def remain_len(self) -> int:
        """还能再生成多少个 token。"""
        return self.max_device_len - self.device_len

    @property
    def extend_len(self) -> int:
        """这一步前向要算多少个 token：prefill 时是没命中缓存的那段提示，decode 时是 1。"""
        return self.device_len - self.cached_len

    @property
    def can_decode(self) -> bool:
        """还能不能再 decode 一步。遇到 EOS 而结束由调度器判断，不在这里。"""
        return self.remain_len > 0

    def complete_one(self) -> None:
        """一步前向发出之后的记账，不等这一步的结果回到 CPU。

        这一步算的 token 都会进 KV 池（cached_len 追上 device_len），最后一个位置采样出的
        新 token 留在设备上，下一步才算它（device_len + 1）。Engine 在发出前向时就调用，
        调度器因此能在新 token 拷回 CPU 之前，按新的长度准备下一步。
        """
        assert self.cached_len < self.device_len < self.max_device_len, f"{self!r} 不能再前进"
        self.cached_len = self.device_len
        self.device_len += 1

    def append_host(self, next_token: int | torch.Tensor) -> None:
        """新 token 拷回 CPU 之后追加到 input_ids：CPU 上的 token 可以落后于设备，不能超前。"""
        assert len(self.input_ids) < self.device_len, f"{self!r}：先 complete_one 再 append_host"
        token = torch.tensor([int(next_token)], dtype=torch.int32)
        self.input_ids = torch.cat([self.input_ids, token])

    def __repr__(self) -> str:
        return (
            f"Req(uid={self.uid}, table_idx={self.table_idx}, cached_len={self.cached_len}, "
            f"device_len={self.device_len}, max_device_len={self.max_device_len})"
        )


@dataclass(eq=False)
class Batch:
    """一次前向要算的一组请求。

    创建时只给请求和阶段；其余字段在前向之前才填，填之前去读会得到 AttributeError。
    """

    reqs: list[Req]
    phase: Literal["prefill", "decode"]
    # 由调度器填：各请求这一步的 token 按 padded_reqs 的顺序首尾相接
    input_ids: torch.Tensor = field(init=False)  # 这一步要算的全部 token id
    positions: torch.Tensor = field(init=False)  # 每个 token 在自己序列里的位置
    out_loc: torch.Tensor = field(init=False)  # 这些 token 的 K/V 写进 KV 池的槽位
    padded_reqs: list[Req] = field(init=False)  # 补上占位请求后的列表，不补时就是 reqs
    # 由注意力后端的 prepare_metadata 填
    attn_metadata: BaseAttnMetadata = field(init=False)

    def __post_init__(self) -> None:
        assert self.phase in ("prefill", "decode") and self.reqs, (self.phase, len(self.reqs))

    @property
    def is_prefill(self) -> bool:
        return self.phase == "prefill"

    @property
    def is_decode(self) -> bool:
        return self.phase == "decode"

    @property
    def size(self) -> int:
        """真实请求数。"""
        return len(self.reqs)

    @property
    def padded_size(self) -> int:
        """补齐后的请求数。"""
        return len(self.padded_reqs)

    def __repr__(self) -> str:
        return f"Batch(phase={self.phase!r}, size={self.size}, uids={[r.uid for r in self.reqs]})"


@dataclass(eq=False)
class Context:
    """一个进程里的运行上下文：前向需要、又不方便层层传参的东西挂在这里。

    最重要的是"当前批次"：注意力层要知道这一批有哪些请求、各自多长，
    但模型的 forward() 不带 batch 参数，它在前向期间从 ``ctx.batch`` 读取。
    """

    page_size: int
    attn_backend: BaseAttnBackend = field(init=False)  # Engine 初始化时装上
    moe_backend: BaseMoeBackend = field(init=False)  # 模型有 MoE 层时 Engine 装上（和 attn_backend 一样）
    _batch: Batch | None = field(default=None, init=False)

    @property
    def batch(self) -> Batch:
        """当前正在前向的批次；只能在 ``with ctx.forward_batch(batch):`` 里面读。"""
        assert self._batch is not None, "没有正在前向的批次：ctx.batch 只能在 forward_batch 里读"
        return self._batch

    @contextmanager
    def forward_batch(self, batch: Batch) -> Iterator[Batch]:
        """在 with 块内把 batch 设为当前批次；离开时（包括出异常）一定清掉。"""
        # 检查放在 try 之外：拒绝嵌套时不能顺手把外层的批次清掉
        assert self._batch is None, f"forward_batch 不能嵌套：{self._batch!r} 还在前向"
        self._batch = batch
        try:
            yield batch
        finally:
            self._batch = None

    def __repr__(self) -> str:
        return f"Context(page_size={self.page_size}, batch={self._batch!r})"


_GLOBAL_CTX: Context | None = None


def set_global_ctx(ctx: Context | None) -> None:
    """登记本进程的全局上下文（Engine 创建时调用）；新登记的替换旧的，传 None 清除。"""
    global _GLOBAL_CTX
    _GLOBAL_CTX = ctx


def get_global_ctx() -> Context:
    """取本进程的全局上下文。"""
    assert _GLOBAL_CTX is not None, "全局上下文还没有设置：先调用 set_global_ctx(ctx)"
    return _GLOBAL_CTX
