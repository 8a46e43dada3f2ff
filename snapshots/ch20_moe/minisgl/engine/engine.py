"""Engine：把模型、KV 池、页表、注意力后端、采样器装配在一起，一次算一批。

Engine 只管"算"：给它一个准备好的 Batch（input_ids、positions、out_loc 已填好，
注意力元数据已准备好），它做一次前向、采样出每个请求的下一个 token。
哪些请求进这一批、它们的 K/V 放在池子的哪一页，是调度器一侧的事：分配器、页表的行
都归调度器，Engine 只提供页表和页数。

重叠调度要求前向"发出去就返回"。GPU 上内核本来就是排进流里异步执行的；
CPU 上没有流，start_worker() 之后前向交给一个工作线程，按提交顺序一个个执行（CpuStream），
CpuEvent 代替 CUDA 事件。不调用 start_worker() 时一切照旧：CPU 上前向当场算完。

张量并行（TP>1）时每个 rank 一个进程、各有一个 Engine：它们经 torch.distributed 连成一组，
KV 池的页数取所有 rank 的最小值，采样出的 token 以 rank 0 的为准。

图捕获（第 18 章）：decode 批交给 GraphRunner，按录好的（GPU 上的 CUDA 图、CPU 上 torch.compile
编译好的）那份前向重放；prefill 和没录的批大小照常逐个算子执行。
"""

from __future__ import annotations

import copy
import gc
import os
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

import torch
import torch._inductor.config  # 编译 decode 时临时改它的 cpp_wrapper
import torch.distributed as dist

from minisgl.attention import BaseAttnBackend, create_attention_backend
from minisgl.core import Batch, Context, Req, SamplingParams, set_global_ctx
from minisgl.distributed import (
    DistributedCommunicator,
    destroy_distributed,
    local_kv_heads,
    set_expert_parallel,
    set_tp_info,
)
from minisgl.kvcache import BaseKVCachePool, create_kvcache_pool
from minisgl.layers import rope_tables_to
from minisgl.layers.hugepages import move_weights_to_huge_pages
from minisgl.layers.norm import use_cpp_norms
from minisgl.layers.quant import prepare_linear_layers, resolve_cpu_kernels
from minisgl.models import BaseLLMModel, create_model, load_weight
from minisgl.moe import create_moe_backend, resolve_moe_backend
from minisgl.utils import device_of, init_logger, is_cuda, torch_dtype

from .config import EngineConfig
from .graph import GraphRunner, capture_batch_sizes
from .sample import BatchLogprobs, BatchSamplingArgs, Sampler

logger = init_logger(__name__)


class CpuStream:
    """CPU 上的"流"：一个工作线程，任务按提交的先后一个个执行（FIFO），像 GPU 上一条流里的内核。

    只有一个线程，所以排在后面的任务一定看得到前面任务写下的结果，不需要别的同步。
    出错像 CUDA 一样是"粘住"的：一个任务失败后，排在它后面的任务都不再执行、抛同一个异常，
    之后的 submit 在调用线程上当场抛出。后面的任务依赖前面的结果（取输入 → 前向 → 写回），
    前面错了，后面算出来的只会是垃圾。
    """

    def __init__(self, num_threads: int) -> None:
        self.num_threads = num_threads  # 工作线程里算子用几个 intra-op 线程
        self.error: BaseException | None = None  # 第一个失败的任务抛出的异常
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="minisgl-forward",
                                        initializer=torch.set_num_threads, initargs=(num_threads,))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        if self.error is not None:
            raise self.error
        return self._pool.submit(self._run, fn, args)

    def _run(self, fn: Callable[..., Any], args: tuple) -> Any:
        if self.error is not None:  # 前面的任务失败了：这个不再执行
            raise self.error
        try:
            # inference_mode 只对进入它的线程有效：调用线程（例如服务里建调度器的线程）在里面，
            # 工作线程并不在。引擎只做推理，工作线程上的任务一律在 inference_mode 里执行
            with torch.inference_mode():
                return fn(*args)
        except BaseException as error:
            self.error = error
            raise

    def synchronize(self) -> None:
        """等到此刻之前提交的任务全部做完；有任务失败时抛出它的异常。"""
        self.submit(lambda: None).result()

    def close(self) -> None:
        """等排着的任务做完（失败的不再抛出），关掉工作线程。"""
        self._pool.shutdown(wait=True)


class CpuEvent:
    """CPU 上的"事件"：代表工作线程上的一个任务，以及排在它前面的全部任务（FIFO）。"""

    def __init__(self, future: Future) -> None:
        self._future = future

    def synchronize(self) -> None:
        """等这个任务做完。它或排在它前面的任务失败时，在这里抛出那个异常，不会被悄悄吞掉。"""
        self._future.result()

    def query(self) -> bool:
        """做完了没有（不等）。"""
        return self._future.done()


@dataclass
class ForwardOutput:
    next_tokens: torch.Tensor  # int32 [批大小]，在设备上
    next_tokens_cpu: torch.Tensor  # 同一批 token 拷到 CPU 上的副本，调度器用它更新请求
    # 异步时（GPU 上的拷贝、CPU 上的工作线程）等这个事件完成再读 CPU 副本；同步时为 None
    copy_done: torch.cuda.Event | CpuEvent | None = None
    logprobs: BatchLogprobs | None = None  # 有请求要 logprobs 时：CPU 上的副本，和 token 一起拷


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        _check_no_live_engine()  # 全局上下文一个进程只有一份：第二个 Engine 会把第一个的换掉
        self.config = config
        tp = config.tp_info
        config.check_tp_split()  # 切不开就在建任何东西之前说清楚
        set_tp_info(tp.rank, tp.size)  # 之后建层、切权重、建 KV 池都按这个 rank 来
        set_expert_parallel(config.ep_size > 1)  # MoE 层建层、读专家权重时按它分专家
        self.device = torch.device(config.device) if config.device else device_of(tp.rank)
        self.stream: torch.cuda.Stream | None = None  # CPU 上没有流
        self.worker: CpuStream | None = None  # CPU 上的重叠调度：start_worker() 之后才有
        if is_cuda(self.device):
            # 设成当前设备：之后不写设备号的 CUDA 调用（事件、当前流、新张量）都落在这块卡上
            torch.cuda.set_device(self.device)
            # 自己的流，设成当前流：之后建张量、前向、拷贝都排在它上面。不用默认流，因为默认流
            # （legacy）和其他流隐式同步，会把 NCCL 和别的流串起来；CUDA 图捕获也不能在它上面做
            self.stream = torch.cuda.Stream(self.device)
            torch.cuda.set_stream(self.stream)
        # 控制用的 gloo 组（CPU 上的小张量：KV 页数、每步的消息条数）；单卡时没有
        self.tp_cpu_group: dist.ProcessGroup | None = None
        if tp.size > 1:
            _share_cores(config.local_ranks)
            self.tp_cpu_group = self._init_distributed()
            self._comm = DistributedCommunicator()
        self.model_config = config.model_config
        self.ctx = Context(page_size=config.page_size)
        set_global_ctx(self.ctx)

        self.moe_backend: str | None = None
        if self.model_config.is_moe:  # 和注意力后端一样挂在上下文上：MoE 层前向时从 ctx 取
            self.moe_backend = resolve_moe_backend(config.moe_backend, self.device)
            self.ctx.moe_backend = create_moe_backend(self.moe_backend)
        self.model = self._load_model()
        self.cpu_kernels = resolve_cpu_kernels(config.cpu_kernels, config.quantization, self.device,
                                                   config.dtype)
        if self.cpu_kernels == "cpp":  # 线性层装上 C++ GEMV（量化时顺便把权重换成 int8 / int4），RMSNorm 换成 C++ 的
            prepare_linear_layers(self.model, config.quantization)
            use_cpp_norms(self.model)
            move_weights_to_huge_pages(self.model)  # decode 每步把权重读一遍：大页让 TLB 不再拖慢这一遍
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
        # 占位请求：补齐批大小用。它坐在占位行上，只有 1 个 token，K/V 写进占位页
        self.dummy_req = Req(input_ids=torch.zeros(1, dtype=torch.int32), table_idx=config.max_running_req,
                             cached_len=0, output_len=1, uid=-1, sampling_params=SamplingParams(),
                             cache_handle=None)
        batch_sizes = self._graph_batch_sizes()
        if config.compile_cpp_wrapper and (is_cuda(self.device) or not batch_sizes):
            raise ValueError("compile_cpp_wrapper 只在 CPU 上编译 decode 时有用：同时给 cuda_graph_bs 或 cuda_graph_max_bs")
        # 编译发生在 GraphRunner 里：C++ 外壳这个选项只在这段时间生效（inductor 按它生成代码，也按它分缓存）
        with torch._inductor.config.patch(cpp_wrapper=config.compile_cpp_wrapper):
            self.graph_runner = GraphRunner(
                self.model, self.ctx, self.attn_backend, batch_sizes, self.dummy_req,
                dummy_slot=self.dummy_page * config.page_size, max_seq_len=self.max_seq_len,
                device=self.device, stream=self.stream)
        _claim_process(self)

    def _graph_batch_sizes(self) -> list[int]:
        c = self.config
        bs_list = capture_batch_sizes(c.cuda_graph_bs, c.cuda_graph_max_bs, c.max_running_req, self.device)
        if bs_list and self.moe_backend == "loop":
            raise ValueError("MoE 的 loop 后端录不了图（每个专家几行取决于数据，要读回主机）："
                             "录图时用 moe_backend=\"fused\"，或者不录（cuda_graph_max_bs=0）")
        if bs_list and self.tp_cpu_group is not None and not is_cuda(self.device):
            raise ValueError("CPU 上 TP>1 时不能编译 decode（cuda_graph_max_bs 设成 0）："
                             "本书没有把 gloo 的集合通信放进 torch.compile 编译出的图")
        return bs_list

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
        if not is_cuda(self.device):  # 同一台机器上的 rank 共用一份内存：各拿一份额度
            budget //= self.config.local_ranks
        num_pages = budget // self.kv_bytes_per_page()
        if self.tp_cpu_group is not None:
            num_pages = self._agree_on_num_pages(num_pages)
        if num_pages < 1:
            raise RuntimeError(f"内存不够放下哪怕一页 KV：可用预算 {budget} 字节，"
                               f"一页要 {self.kv_bytes_per_page()} 字节")
        logger.debug_rank0("KV 池：%d 页 × %d token/页（预算 %.2f GiB）",
                           num_pages, self.config.page_size, budget / 2**30)
        return num_pages

    def _agree_on_num_pages(self, mine: int) -> int:
        """所有 rank 用同一个页数：取最小值。

        各 rank 量到的空闲内存不同（量的时刻不同、别的进程在用）；页数一不同，池子紧张时各 rank
        接纳、逐出的请求就不同，拼出的批对不上。一次 all_reduce(MIN) 同时得到最小值和最大值。
        """
        box = torch.tensor([mine, -mine], dtype=torch.int64)
        dist.all_reduce(box, op=dist.ReduceOp.MIN, group=self.tp_cpu_group)
        low, high = int(box[0]), -int(box[1])
        if low != high:
            logger.info_rank0("各 rank 能放的 KV 页数不同（%d～%d），都用 %d", low, high, low)
        return low

    def start_worker(self) -> None:
        """CPU 上的重叠调度：之后的前向（和 enqueue 的任务）都交给一个工作线程按顺序执行。"""
        assert self.stream is None, "GPU 上内核本来就排在流里异步执行，不需要工作线程"
        if self.worker is None:
            # 前向用调用线程的全部 intra-op 线程：调度器线程每步只要零点几毫秒，给它留一个核，
            # 前向在 2 核的机器上就只剩一半（第 11 章的测量）
            self.worker = CpuStream(num_threads=torch.get_num_threads())

    def enqueue(self, fn: Callable[..., Any], *args: Any) -> None:
        """让 fn 排在已经发出的前向之后执行。

        CPU 上有工作线程时交给它排队；否则当场执行（GPU 上当场执行也只是把内核排进流里）。
        调度器用它在 token 池里取输入、写新 token：这两件事必须和前向保持先后顺序。
        """
        if self.worker is not None:
            self.worker.submit(fn, *args)
        else:
            fn(*args)

    def record_event(self) -> torch.cuda.Event | CpuEvent | None:
        """一个事件：它完成时，此刻之前发出的工作（前向、enqueue 的任务）全部完成。

        同步执行（CPU 上没有工作线程）时什么都不用等，返回 None。
        """
        if self.worker is not None:
            return CpuEvent(self.worker.submit(lambda: None))
        if self.stream is None:
            return None
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def synchronize(self) -> None:
        """等到已经发出的工作全部做完。"""
        if self.worker is not None:
            self.worker.synchronize()
        elif self.stream is not None:
            self.stream.synchronize()

    def forward_batch(self, batch: Batch, args: BatchSamplingArgs) -> ForwardOutput:
        """一次前向加采样，并在发射时就替每个请求记账（complete_one）。

        batch 必须已经准备好（见第 6 章 main 里的 prepare_batch）。返回时新 token 可能还在设备上
        （CPU 上有工作线程时还没算出来），但请求的 cached_len / device_len 已经前进了一步：
        调度器不等 token 拷回也能准备下一步。
        """
        if self.worker is not None:  # CPU 重叠：先占好结果的位置，前向交给工作线程
            next_tokens = torch.empty(batch.size, dtype=torch.int32)
            # 前向要读请求的长度（例如 LM 头找每个请求的最后一个 token），而调度器线程下一行就
            # complete_one：给工作线程一份发射时的副本，它读到的长度不会跟着变
            launched = _launch_copy(batch)
            done = self.worker.submit(self._forward_launched, batch, launched, args, next_tokens)
            for req in batch.reqs:
                req.complete_one()  # 在调度器线程上、发射时记账，和 GPU 上一样
            # args.logprobs 由工作线程在采样时填好（在 CPU 上）
            return ForwardOutput(next_tokens, next_tokens, CpuEvent(done), args.logprobs)
        next_tokens = self._forward_and_sample(batch, args)
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

    def _forward_and_sample(self, batch: Batch, args: BatchSamplingArgs,
                            out: torch.Tensor | None = None) -> torch.Tensor:
        """前向加采样：只算，不记账。out 不为 None 时把结果写进去（工作线程上用）。"""
        with torch.inference_mode():
            if self.graph_runner.can_replay(batch):
                logits = self.graph_runner.replay(batch)
            else:
                with self.ctx.forward_batch(batch):
                    logits = self.model.forward()
            next_tokens = self.sampler.sample(logits[: batch.size], args)  # 补齐的占位行不采样
            if self.tp_cpu_group is not None and not args.all_greedy:
                # 随机采样以 rank 0 为准：各 rank 的 logits 相同，但随机数发生器只要有一步没对齐
                # （某个 rank 多抽过一次、种子不同），抽出的 token 就不同，之后拼的批也对不上
                self._comm.broadcast(next_tokens, src=0)
        if out is None:
            return next_tokens
        return out.copy_(next_tokens)

    def _forward_launched(self, batch: Batch, launched: Batch, args: BatchSamplingArgs,
                          out: torch.Tensor) -> torch.Tensor:
        """工作线程上：按发射时的副本前向。input_ids 是排在前面的任务刚填进 batch 的。"""
        launched.input_ids = batch.input_ids
        return self._forward_and_sample(launched, args, out)

    def _init_distributed(self) -> dist.ProcessGroup:
        """TP>1：每个 rank 一个进程，经 torch.distributed 连成一组；返回控制用的 gloo 组。

        默认组传层里的张量：GPU 上 NCCL，CPU 上 gloo。另建一个 gloo 组传控制信息（CPU 上的
        小整数）：GPU 上 NCCL 只收显存里的张量；CPU 上也要分开，因为重叠调度时前向的 all_reduce
        在工作线程上、消息条数的广播在调度器线程上，两个线程往同一个组里发集合通信，各 rank
        上两者的先后不一定相同，就会互相配错。
        """
        tp, config = self.config.tp_info, self.config
        backend = "nccl" if is_cuda(self.device) else "gloo"
        timeout = timedelta(seconds=config.distributed_timeout)
        if config.nnodes > 1:
            _pick_gloo_interface(config.dist_init_addr)
        try:
            dist.init_process_group(backend=backend, init_method=config.dist_init_method,
                                    rank=tp.rank, world_size=tp.size, timeout=timeout)
            return dist.new_group(backend="gloo", timeout=timeout)
        except (RuntimeError, ValueError) as e:  # 等不齐（DistStoreError 是 RuntimeError）、地址不对
            raise RuntimeError(f"rank {tp.rank}：{config.distributed_timeout:.0f} 秒内没能和另外 "
                               f"{tp.size - 1} 个 rank 在 {config.dist_init_method} 建起进程组"
                               f"（{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}）") from e

    def shutdown(self) -> None:
        """释放全局状态：工作线程、全局上下文、TP 登记、进程组。之后这个 Engine 不能再用；
        再调一次什么都不做。"""
        if not _release_process(self):  # 已经 shutdown 过：全局状态可能已经属于下一个 Engine
            return
        if self.worker is not None:
            self.worker.close()  # 先等排着的前向做完：它们还要读全局上下文
            self.worker = None
        self.graph_runner.destroy()
        set_global_ctx(None)
        set_tp_info(0, 1)
        set_expert_parallel(False)
        destroy_distributed()


def _launch_copy(batch: Batch) -> Batch:
    """批的浅拷贝，其中每个请求换成此刻的副本（只是几个整数长度，token 张量共用）。"""
    launched = copy.copy(batch)
    frozen = {id(req): copy.copy(req) for req in batch.padded_reqs}
    launched.reqs = [frozen[id(req)] for req in batch.reqs]
    launched.padded_reqs = [frozen[id(req)] for req in batch.padded_reqs]
    return launched


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


def _pick_gloo_interface(dist_init_addr: str) -> None:
    """多机时告诉 gloo 用哪块网卡：通往 rank 0 那台机器的那一块。

    gloo 默认把本机的主机名解析成地址，在那个地址上等别的 rank 连过来。很多机器的 /etc/hosts 把
    主机名写成 127.0.0.1（Debian/Ubuntu 是 127.0.1.1），别的机器照着这个地址连，连到的是它自己。
    这里问内核去 dist_init_addr 走哪个本机地址，找出它所在的网卡，设成 GLOO_SOCKET_IFNAME。
    用户自己设过就照用户的；找不到（例如只有 IPv6）就不设，交给 gloo。
    """
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    import fcntl
    import socket
    import struct

    host, port = dist_init_addr.rsplit(":", 1)
    siocgifaddr = 0x8915  # ioctl：一块网卡的 IPv4 地址
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port)))  # UDP 的 connect 不发包，只让内核选好路由和本机地址
            local_ip = s.getsockname()[0]
            for _, name in socket.if_nameindex():
                try:
                    raw = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
                except OSError:
                    continue
                if socket.inet_ntoa(raw[20:24]) == local_ip:
                    os.environ["GLOO_SOCKET_IFNAME"] = name
                    logger.info("gloo 走网卡 %s（%s）；要换就设环境变量 GLOO_SOCKET_IFNAME", name, local_ip)
                    return
    except OSError:
        pass


def _share_cores(local_ranks: int) -> None:
    """同一台机器上的几个 rank 平分 CPU 核：每个 rank 的 intra-op 线程 = 核数 ÷ 本机 rank 数。

    torch 默认每个进程用满所有核，n 个 rank 就是 n 倍的线程抢同样的核，互相等（超额订阅）。
    已经设得更少（例如 OMP_NUM_THREADS=1）时不加。
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    torch.set_num_threads(max(1, min(torch.get_num_threads(), cores // local_ranks)))


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
