"""引擎里流动的核心数据：采样参数、请求、批次，以及前向时的全局上下文。

- SamplingParams：一个请求"怎么挑下一个 token"、"最多生成多少"。
- Req：调度器眼里的一个请求，核心是几条长度记账（cached_len、device_len ……）。
- Batch：一次前向要算的一组请求，prefill 或 decode。
- Context：一个进程里唯一的运行上下文；前向期间通过它拿到当前批次，
  模型各层因此不必把 batch 一层层当参数往下传。
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Iterator, Literal, TypeVar, overload

import torch

if TYPE_CHECKING:  # 这些类型在后面的章节才出现，这里只用于类型标注
    from minisgl.attention import BaseAttnBackend, BaseAttnMetadata
    from minisgl.kvcache import BaseCacheHandle, BaseKVCachePool
    from minisgl.moe import BaseMoeBackend

T = TypeVar("T")


class SetLater(Generic[T]):
    """一个"创建时还没有、稍后由别的组件填上"的属性。

    没填就去读，会得到一条说明由谁来填的 AttributeError，
    而不是在几层调用之外撞上一个 None。
    """

    def __init__(self, what: str, filled_by: str) -> None:
        self.what = what  # 这个属性是什么
        self.filled_by = filled_by  # 一句话：谁、在什么时候填它

    def __set_name__(self, owner: type, name: str) -> None:
        self.owner_name = owner.__name__
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> SetLater[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            return obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(
                f"{self.owner_name}.{self.name}（{self.what}）还没有设置：{self.filled_by}"
            ) from None

    def __set__(self, obj: object, value: T) -> None:
        obj.__dict__[self.name] = value


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass
class SamplingParams:
    """一个请求的采样参数。默认值就是贪心解码、最多生成 1024 个 token。"""

    temperature: float = 0.0  # 0 表示贪心：直接取概率最大的 token
    top_k: int = -1  # 只在概率最大的 k 个 token 里采样；-1 表示不限制
    top_p: float = 1.0  # 只在累计概率达到 p 的最小集合里采样；1.0 表示不限制
    ignore_eos: bool = False  # True 时生成到 EOS 也不停，一直到 max_tokens
    max_tokens: int = 1024  # 最多生成多少个新 token

    def __post_init__(self) -> None:
        # 坏参数要在进入引擎之前拦住：temperature<0 或 top_p=0 到了采样器里只会变成 nan
        t, k, p, n = self.temperature, self.top_k, self.top_p, self.max_tokens
        if not (_is_number(t) and math.isfinite(t) and t >= 0):
            raise ValueError(f"temperature 必须是 ≥ 0 的有限实数（0 表示贪心），收到 {t!r}")
        if not (_is_int(k) and (k == -1 or k >= 1)):
            raise ValueError(f"top_k 必须是 -1（不限制）或 ≥ 1 的整数，收到 {k!r}")
        if not (_is_number(p) and 0 < p <= 1):
            raise ValueError(f"top_p 必须在 (0, 1] 之间（1 表示不限制），收到 {p!r}")
        if not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos 必须是 True 或 False，收到 {self.ignore_eos!r}")
        if not (_is_int(n) and n >= 1):
            raise ValueError(f"max_tokens 必须是 ≥ 1 的整数，收到 {n!r}")

    @property
    def is_greedy(self) -> bool:
        """结果是否与"每步取 argmax"相同：温度为 0，或者只在第 1 名里"采样"。"""
        return self.temperature == 0.0 or self.top_k == 1


@dataclass(eq=False, kw_only=True)  # eq=False：按对象身份比较和哈希，请求可以放进 set
class Req:
    """调度器眼里的一个请求。

    一个请求的 token 序列按下标分成三段（都是左闭右开）::

        [0, cached_len)                K/V 已经在 KV 池里
        [cached_len, device_len)       这一步前向要算的 token，共 extend_len 个
        [device_len, max_device_len)   还能再生成的名额，共 remain_len 个

    - prefill 时 cached_len 是命中前缀缓存的长度（没命中就是 0），要算的是剩下的提示；
    - 每算完一步调用 complete_one()：这一步的 token 都进了 KV 池（cached_len = device_len），
      同时采样出一个新 token（device_len += 1），它要到下一步才被算；
    - 于是 decode 时 extend_len 恒为 1，remain_len 每步减 1，减到 0 就不能再 decode。
    """

    input_ids: torch.Tensor  # CPU 上的 int32 一维张量：提示 + 已经拿回 CPU 的生成结果
    table_idx: int  # 在页表（page table）里占的行号，第 4 章用
    cached_len: int
    output_len: int  # 最多生成多少个 token（通常就是 sampling_params.max_tokens）
    uid: int  # 请求的全局编号，前端靠它把结果送回对应的用户
    sampling_params: SamplingParams
    cache_handle: BaseCacheHandle | None  # 前缀缓存里命中部分的句柄，第 8、9 章用

    device_len: int = field(init=False)  # 已知的 token 数（提示 + 已生成）
    max_device_len: int = field(init=False)  # 提示长度 + output_len，序列长度的上限

    def __post_init__(self) -> None:
        ids = self.input_ids
        if not (isinstance(ids, torch.Tensor) and ids.dim() == 1):
            raise ValueError(f"input_ids 必须是一维张量，收到 {_describe(ids)}")
        if ids.device.type != "cpu" or ids.dtype != torch.int32:
            raise ValueError(
                f"input_ids 必须是 CPU 上的 int32 张量，收到 {ids.device} 上的 {ids.dtype}"
            )
        if not (_is_int(self.output_len) and self.output_len >= 1):
            raise ValueError(f"output_len 必须是 ≥ 1 的整数，收到 {self.output_len!r}")
        # 至少留 1 个 token 给这一步去算：最后一个位置的 logits 才能给出下一个 token
        if not 0 <= self.cached_len < len(ids):
            raise ValueError(
                f"cached_len 必须满足 0 ≤ cached_len < 输入长度 {len(ids)}，收到 {self.cached_len}"
            )
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
        """一步前向完成：这一步算的 token 都进了 KV 池，并且新采样出了一个 token。"""
        if not self.can_decode:
            raise RuntimeError(f"{self!r} 已经生成满 {self.output_len} 个 token，不能再前进一步")
        self.cached_len = self.device_len
        self.device_len += 1

    def append_host(self, next_token: int | torch.Tensor) -> None:
        """把新 token 追加到 CPU 上的 input_ids。

        新 token 先在设备上算出来，拷回 CPU 要时间；重叠调度（第 11 章）下，
        拷回时这个请求可能已经又前进了一步。所以只要求 CPU 上的 token 数不超过
        device_len，不要求两者时刻相等。
        """
        if len(self.input_ids) >= self.device_len:
            raise RuntimeError(
                f"{self!r} 的 input_ids 已有 {len(self.input_ids)} 个 token，"
                f"append_host 必须跟在 complete_one 之后"
            )
        token = torch.as_tensor(next_token)
        if token.numel() != 1:
            raise ValueError(f"append_host 一次只能追加 1 个 token，收到形状 {tuple(token.shape)}")
        token = token.to(device="cpu", dtype=torch.int32).reshape(1)
        self.input_ids = torch.cat([self.input_ids, token])

    def __repr__(self) -> str:
        return (
            f"Req(uid={self.uid}, table_idx={self.table_idx}, cached_len={self.cached_len}, "
            f"device_len={self.device_len}, max_device_len={self.max_device_len})"
        )


def _describe(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"形状为 {tuple(x.shape)} 的张量"
    return type(x).__name__


Phase = Literal["prefill", "decode"]

_BY_SCHEDULER = "调度器在准备批次时填写它"
_BY_ENGINE = "Engine 初始化时会装上它"


@dataclass(eq=False)
class Batch:
    """一次前向要算的一组请求。

    创建时只需要请求和阶段；其余字段由调度器和注意力后端在前向之前填好。
    """

    reqs: list[Req]
    phase: Phase

    # 以下字段在批次创建之后才填写，按 padded_reqs 的顺序把各请求这一步的 token 拼成一维
    input_ids = SetLater[torch.Tensor]("这一步要算的全部 token id", _BY_SCHEDULER)
    positions = SetLater[torch.Tensor]("每个 token 在自己序列里的位置", _BY_SCHEDULER)
    out_loc = SetLater[torch.Tensor]("这些 token 的 K/V 写进 KV 池的槽位", _BY_SCHEDULER)
    padded_reqs = SetLater[list[Req]]("补上占位请求后的列表，不补时就是 reqs", _BY_SCHEDULER)
    attn_metadata = SetLater["BaseAttnMetadata"](
        "注意力后端要用的元数据", "注意力后端的 prepare_metadata 填写它"
    )

    def __post_init__(self) -> None:
        if self.phase not in ("prefill", "decode"):
            raise ValueError(f"phase 只能是 'prefill' 或 'decode'，收到 {self.phase!r}")
        if len(self.reqs) == 0:
            raise ValueError("一个批次至少要有一个请求")

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
        """补齐后的请求数（第 18 章图捕获按固定批大小补齐）。"""
        return len(self.padded_reqs)

    def __repr__(self) -> str:
        uids = [req.uid for req in self.reqs]
        return f"Batch(phase={self.phase!r}, size={self.size}, uids={uids})"


class Context:
    """一个进程里的运行上下文：前向需要、又不方便层层传参的东西都挂在这里。

    最重要的是"当前批次"：注意力层要知道这一批有哪些请求、各自多长，
    但模型的 forward() 不带 batch 参数，它在前向期间从 ``ctx.batch`` 读取。
    """

    # 以下由 Engine 初始化时装上。page_table 每行属于一个请求，
    # 存它每个 token 在 KV 池里的槽位（按 token 记，不按页）。
    page_table = SetLater[torch.Tensor]("页表", _BY_ENGINE)
    kv_cache = SetLater["BaseKVCachePool"]("KV 池", _BY_ENGINE)
    attn_backend = SetLater["BaseAttnBackend"]("注意力后端", _BY_ENGINE)
    moe_backend = SetLater["BaseMoeBackend"]("MoE 后端", "只有 MoE 模型的 Engine 才会装上它")

    def __init__(self, page_size: int) -> None:
        if not (_is_int(page_size) and page_size >= 1):
            raise ValueError(f"page_size 必须是 ≥ 1 的整数，收到 {page_size!r}")
        self.page_size = page_size
        self._batch: Batch | None = None

    @property
    def batch(self) -> Batch:
        """当前正在前向的批次；只能在 ``with ctx.forward_batch(batch):`` 里面读。"""
        if self._batch is None:
            raise RuntimeError(
                "当前没有正在前向的批次：ctx.batch 只能在 with ctx.forward_batch(batch) 里读取"
            )
        return self._batch

    @contextmanager
    def forward_batch(self, batch: Batch) -> Iterator[Batch]:
        """在 with 块内把 batch 设为当前批次；离开时（包括出异常）一定清掉。"""
        # 检查放在 try 之外：拒绝嵌套时不能顺手把外层的批次清掉
        if self._batch is not None:
            raise RuntimeError(
                f"forward_batch 不能嵌套：{self._batch!r} 还在前向，不能再开始 {batch!r}"
            )
        self._batch = batch
        try:
            yield batch
        finally:
            self._batch = None

    def __repr__(self) -> str:
        return f"Context(page_size={self.page_size}, batch={self._batch!r})"


_GLOBAL_CTX: Context | None = None


def set_global_ctx(ctx: Context | None) -> None:
    """登记本进程的全局上下文（Engine 创建时调用）；传 None 清除。

    一个进程同一时间只服务一个 Engine：新登记的会替换旧的。
    """
    global _GLOBAL_CTX
    _GLOBAL_CTX = ctx


def get_global_ctx() -> Context:
    """取本进程的全局上下文；还没登记时给出清楚的报错。"""
    if _GLOBAL_CTX is None:
        raise RuntimeError("全局上下文还没有设置：先创建 Context 并调用 set_global_ctx(ctx)")
    return _GLOBAL_CTX
