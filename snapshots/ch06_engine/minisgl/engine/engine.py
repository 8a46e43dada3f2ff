"""Engine：把模型、KV 池、页表、注意力后端、采样器装配在一起，一次算一批。

Engine 只管"算"：给它一个准备好的 Batch（input_ids、positions、out_loc 已填好，
注意力元数据已准备好），它做一次前向、采样出每个请求的下一个 token。
哪些请求进这一批、它们的 K/V 放在池子的哪一页，是调度器一侧的事：分配器、页表的行
都归调度器，Engine 只提供页表和页数。
"""

from __future__ import annotations

import gc
import os
import weakref
from dataclasses import dataclass

import torch

from minisgl.attention import BaseAttnBackend, create_attention_backend
from minisgl.core import Batch, Context, set_global_ctx
from minisgl.distributed import destroy_distributed, local_kv_heads, set_tp_info
from minisgl.kvcache import BaseKVCachePool, create_kvcache_pool
from minisgl.layers import rope_tables_to
from minisgl.models import BaseLLMModel, create_model, load_weight
from minisgl.utils import device_of, init_logger, is_cuda, torch_dtype

from .config import EngineConfig
from .sample import BatchLogprobs, BatchSamplingArgs, Sampler

logger = init_logger(__name__)


@dataclass
class ForwardOutput:
    next_tokens: torch.Tensor  # int32 [批大小]，在设备上
    next_tokens_cpu: torch.Tensor  # 同一批 token 拷到 CPU 上的副本，调度器用它更新请求
    copy_done: torch.cuda.Event | None = None  # GPU 上拷贝是异步的：等这个事件完成再读 CPU 副本
    logprobs: BatchLogprobs | None = None  # 有请求要 logprobs 时：CPU 上的副本，和 token 一起拷


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        _check_no_live_engine()  # 全局上下文一个进程只有一份：第二个 Engine 会把第一个的换掉
        self.config = config
        tp = config.tp_info
        set_tp_info(tp.rank, tp.size)  # 之后建层、切权重、建 KV 池都按这个 rank 来
        self.device = torch.device(config.device) if config.device else device_of(tp.rank)
        self.stream: torch.cuda.Stream | None = None  # CPU 上没有流
        if is_cuda(self.device):
            # 设成当前设备：之后不写设备号的 CUDA 调用（事件、当前流、新张量）都落在这块卡上
            torch.cuda.set_device(self.device)
            # 自己的流，设成当前流：之后建张量、前向、拷贝都排在它上面。不用默认流，因为默认流
            # （legacy）和其他流隐式同步，会把 NCCL 和别的流串起来；CUDA 图捕获也不能在它上面做
            self.stream = torch.cuda.Stream(self.device)
            torch.cuda.set_stream(self.stream)
        if tp.size > 1:
            self._init_distributed()
        self.model_config = config.model_config
        self.ctx = Context(page_size=config.page_size)
        set_global_ctx(self.ctx)

        self.model = self._load_model()
        self.num_pages = self._decide_num_pages()  # 能分给请求的页：0 .. num_pages-1
        self.dummy_page = self.num_pages  # 多建一页，不属于任何请求：占位行写 K/V 的地方
        self.kv_cache: BaseKVCachePool = create_kvcache_pool(
            self.model_config, self.num_pages + 1, config.page_size, config.dtype, self.device
        )
        # 一个请求再长也放不下比整个池子还多的 token：页表宽度按池子封顶
        self.max_seq_len = min(config.max_seq_len, self.num_pages * config.page_size)
        # 页表：一行一个请求，第 j 列是这个请求第 j 个 token 的 K/V 在池中的槽位。
        # 多出的最后一行是占位行（补齐批大小用），整行指向占位页
        self.page_table = torch.zeros(
            (config.max_running_req + 1, self.max_seq_len), dtype=torch.int32, device=self.device
        )
        self.page_table[-1] = self.dummy_page * config.page_size
        self.attn_backend: BaseAttnBackend = create_attention_backend(
            config.attention_backend, self.kv_cache, self.page_table
        )
        self.ctx.attn_backend = self.attn_backend
        self.sampler = Sampler(self.device, self.model_config.vocab_size, seed=config.seed,
                               max_running_req=config.max_running_req)
        _claim_process(self)

    def _load_model(self) -> BaseLLMModel:
        # 先在 meta 设备上搭架子：形状都有，内存一字节不占；再用流式加载的真权重逐个替换
        with torch.device("meta"), torch_dtype(self.config.dtype):
            model = create_model(self.model_config)
        weights = load_weight(
            self.config.model_path, self.model_config, device=self.device, dtype=self.config.dtype
        )
        model.load_state_dict(dict(weights))
        # RoPE 的 cos/sin 表是算出来的、不随权重上卡：现在一次搬过去，而不是在第一步的前向里
        rope_tables_to(self.device)
        return model

    def kv_bytes_per_page(self) -> int:
        """一页 KV 在本 rank 上占多少字节：K 和 V × 层数 × 本地 KV 头 × head_dim × page_size。"""
        c = self.model_config
        itemsize = torch.empty(0, dtype=self.config.dtype).element_size()
        return 2 * c.num_layers * local_kv_heads(c.num_kv_heads) * c.head_dim * itemsize \
            * self.config.page_size

    def _decide_num_pages(self) -> int:
        if self.config.num_page_override is not None:
            return self.config.num_page_override
        budget = int(_free_memory(self.device) * self.config.memory_ratio)
        num_pages = budget // self.kv_bytes_per_page()
        if num_pages < 1:
            raise RuntimeError(f"内存不够放下哪怕一页 KV：可用预算 {budget} 字节，"
                               f"一页要 {self.kv_bytes_per_page()} 字节")
        logger.debug_rank0("KV 池：%d 页 × %d token/页（预算 %.2f GiB）",
                           num_pages, self.config.page_size, budget / 2**30)
        return num_pages

    def forward_batch(self, batch: Batch, args: BatchSamplingArgs) -> ForwardOutput:
        """一次前向加采样，并在发射时就替每个请求记账（complete_one）。

        batch 必须已经准备好（见本章 main 里的 prepare_batch）。返回时新 token 可能还在设备上，
        但请求的 cached_len / device_len 已经前进了一步：调度器不等 token 拷回也能准备下一步。
        """
        with self.ctx.forward_batch(batch), torch.inference_mode():
            logits = self.model.forward()
            next_tokens = self.sampler.sample(logits[: batch.size], args)  # 补齐的占位行不采样
        for req in batch.reqs:
            req.complete_one()  # 这一步的 token 已进 KV 池，新 token 占住下一个位置
        if self.stream is None:  # CPU：没有异步可言，副本就是原张量
            return ForwardOutput(next_tokens, next_tokens, logprobs=args.logprobs)
        assert torch.cuda.current_stream() == self.stream, "前向必须发射在 Engine 的流上"
        next_tokens_cpu = next_tokens.to("cpu", non_blocking=True)  # 目标在锁页内存里，异步拷
        logprobs = args.logprobs and args.logprobs.to("cpu", non_blocking=True)
        copy_done = torch.cuda.Event()
        copy_done.record(self.stream)  # 排在这次拷贝之后：它完成，CPU 副本就能读
        return ForwardOutput(next_tokens, next_tokens_cpu, copy_done, logprobs)

    def _init_distributed(self) -> None:
        """TP>1：每个 rank 一个进程，经 torch.distributed 连成一组（第 16 章展开讲）。"""
        import torch.distributed as dist

        tp = self.config.tp_info
        backend = "nccl" if is_cuda(self.device) else "gloo"
        dist.init_process_group(
            backend=backend, init_method=f"tcp://127.0.0.1:{self.config.distributed_port}",
            rank=tp.rank, world_size=tp.size,
        )

    def shutdown(self) -> None:
        """释放全局状态：全局上下文、TP 登记、进程组。之后这个 Engine 不能再用；再调一次什么都不做。"""
        if not _release_process(self):  # 已经 shutdown 过：全局状态可能已经属于下一个 Engine
            return
        set_global_ctx(None)
        set_tp_info(0, 1)
        destroy_distributed()


# 这个进程里还没 shutdown 的 Engine（弱引用：没人再引用、已被回收的 Engine 不算）
_live_engine: weakref.ref[Engine] | None = None


def _check_no_live_engine() -> None:
    if _live_engine is not None and _live_engine() is not None:
        gc.collect()  # 被丢掉但还在引用环里的 Engine 先回收掉，它不会再被用了
    if _live_engine is not None and _live_engine() is not None:
        raise RuntimeError("这个进程里已经有一个 Engine 还没有 shutdown()：全局上下文（注意力后端、"
                           "TP 登记）一个进程只有一份，第二个 Engine 会把第一个的换掉。"
                           "先调用前一个的 shutdown()（LLM / Scheduler 也是 shutdown()），再建新的")


def _claim_process(engine: Engine) -> None:
    global _live_engine
    _live_engine = weakref.ref(engine)


def _release_process(engine: Engine) -> bool:
    """engine 是登记着的那个时注销它，返回 True；已经注销过返回 False。"""
    global _live_engine
    if _live_engine is None or _live_engine() is not engine:
        return False
    _live_engine = None
    return True


def _free_memory(device: torch.device) -> int:
    """设备上还能用的内存（字节）。GPU 问驱动；CPU 读 /proc/meminfo 的 MemAvailable。"""
    if is_cuda(device):
        free, _ = torch.cuda.mem_get_info(device)
        return free
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    # 没有 /proc/meminfo（例如 macOS）：退而用总内存估计
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
