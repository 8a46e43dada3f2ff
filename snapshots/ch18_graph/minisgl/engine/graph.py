"""图捕获：decode 这一步按几种固定的批大小各"录"一次，之后每步只"放"录好的那份。

decode 一步的计算量很小，时间大半花在"发射"上：每个算子都要经过 Python、分派、检查形状、
启动内核。批大小固定时，这一步的算子序列、每个张量的形状都固定，可以录下来反复用：

- GPU：CUDA 图。在一条旁路流上把整步的内核录进 torch.cuda.CUDAGraph，之后一次 replay() 发出全部内核。
  录下的是内核和它们读写的地址，所以输入必须先拷进录制时用的那几块固定缓冲区。
- CPU：没有 CUDA 图，同样的结构交给 torch.compile（inductor）：每个批大小编译一次整步前向，
  把几千个小算子融合成几十个 C++ 循环。输入同样拷进固定缓冲区，编译出来的代码每步只跑，不再编译。

批大小不在表里的 decode 批，补上占位请求（pad_batch）凑到表里下一个大小；prefill 不走图。
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from minisgl.attention import BaseAttnBackend
from minisgl.core import Batch, Context, Req
from minisgl.models import BaseLLMModel
from minisgl.utils import init_logger, is_cuda

logger = init_logger(__name__)

DEFAULT_MAX_BS_CUDA = 160  # GPU 上默认录到多大的批；CPU 上默认不编译（编译要花时间）


def capture_batch_sizes(cuda_graph_bs: tuple[int, ...] | None, cuda_graph_max_bs: int | None,
                        max_running_req: int, device: torch.device) -> list[int]:
    """要录（编译）哪些批大小，从小到大。

    给了 cuda_graph_bs 就用它；否则 1、2、4，再每 8 个一档，直到 cuda_graph_max_bs
    （默认：GPU 上 160，CPU 上 0，即不录）。超过同时在跑的请求数上限的档位用不上，去掉。
    """
    if cuda_graph_bs is not None:
        sizes = set(cuda_graph_bs)
    else:
        max_bs = cuda_graph_max_bs
        if max_bs is None:
            max_bs = DEFAULT_MAX_BS_CUDA if is_cuda(device) else 0
        sizes = {bs for bs in (1, 2, 4) if bs <= max_bs} | set(range(8, max_bs + 1, 8))
    return sorted(bs for bs in sizes if bs <= max_running_req)


@dataclass
class GraphInputs:
    """录制时用的固定输入缓冲区，按最大的批大小分配；批大小为 bs 的那份图用前 bs 个元素。"""

    input_ids: torch.Tensor  # int32 [max_bs]
    positions: torch.Tensor  # int64 [max_bs]
    out_loc: torch.Tensor  # int32 [max_bs]：这一步的 K/V 写进池子的哪个槽位

    @classmethod
    def allocate(cls, max_bs: int, dummy_slot: int, device: torch.device) -> GraphInputs:
        return cls(input_ids=torch.zeros(max_bs, dtype=torch.int32, device=device),
                   positions=torch.zeros(max_bs, dtype=torch.int64, device=device),
                   out_loc=torch.full((max_bs,), dummy_slot, dtype=torch.int32, device=device))

    def fill(self, batch: Batch) -> None:
        """把这一批的输入拷进缓冲区的前 padded_size 个位置（原地拷，地址不变）。"""
        bs = batch.padded_size
        self.input_ids[:bs].copy_(batch.input_ids)
        self.positions[:bs].copy_(batch.positions)
        self.out_loc[:bs].copy_(batch.out_loc)


class GraphRunner:
    """按 bs_list 里的每个批大小录（编译）一份 decode 前向；之后 decode 批都从这里走。"""

    def __init__(self, model: BaseLLMModel, ctx: Context, attn_backend: BaseAttnBackend,
                 bs_list: list[int], dummy_req: Req, dummy_slot: int, max_seq_len: int,
                 device: torch.device, stream: torch.cuda.Stream | None = None) -> None:
        self.model, self.ctx, self.attn_backend = model, ctx, attn_backend
        self.bs_list = bs_list
        self.dummy_req = dummy_req
        self.device = device
        self.compiles = 0  # CPU：inductor 真正编译了几次（每个批大小应当恰好一次）
        self.capture_seconds = 0.0  # 录制（编译）全部批大小花了多久
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._outputs: dict[int, torch.Tensor] = {}  # GPU：每份图写 logits 的固定输出
        self._compiled: dict[int, object] = {}  # CPU：每个批大小编译好的前向
        self._static: dict[int, Batch] = {}  # 每个批大小一个固定的 Batch，字段都是缓冲区的视图
        if not bs_list:
            return
        max_bs = bs_list[-1]
        self.inputs = GraphInputs.allocate(max_bs, dummy_slot, device)
        attn_backend.init_capture_graph(max_bs, max_seq_len)
        for bs in bs_list:
            self._static[bs] = self._static_batch(bs)
        start = time.perf_counter()
        if is_cuda(device):
            self._capture_cuda(stream)
        else:
            self._compile_cpu()
        self.capture_seconds = time.perf_counter() - start
        logger.info_rank0("%s：%d 个批大小 %s，用了 %.1f 秒", "CUDA 图" if is_cuda(device) else "torch.compile",
                          len(bs_list), bs_list, self.capture_seconds)

    def _static_batch(self, bs: int) -> Batch:
        batch = Batch(reqs=[self.dummy_req] * bs, phase="decode")
        batch.padded_reqs = batch.reqs
        batch.input_ids = self.inputs.input_ids[:bs]
        batch.positions = self.inputs.positions[:bs]
        batch.out_loc = self.inputs.out_loc[:bs]
        self.attn_backend.prepare_for_capture(batch)
        return batch

    def _capture_cuda(self, stream: torch.cuda.Stream | None) -> None:
        """从大到小录：第一份（最大的）图在池子里占的内存，后面较小的图都能复用。"""
        pool = None
        for bs in reversed(self.bs_list):
            batch = self._static[bs]
            with self.ctx.forward_batch(batch), torch.inference_mode():
                self.model.forward()  # 先正常跑一遍：懒初始化（cuBLAS 句柄、工作区）不能发生在录制中
                torch.cuda.synchronize(self.device)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool, stream=stream):
                    self._outputs[bs] = self.model.forward()
            pool = graph.pool()
            self._graphs[bs] = graph

    def _inductor(self, gm: torch.fx.GraphModule, example_inputs: list) -> object:
        """torch.compile 的后端：就是 inductor，只是数一数它被叫了几次（= 编译了几次）。"""
        self.compiles += 1
        return torch._inductor.compile(gm, example_inputs)

    def _compile_cpu(self) -> None:
        # 每个批大小一份编译结果，都挂在 model.forward 这一份字节码上；dynamo 默认最多留 8 份
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                                   len(self.bs_list))
        for bs in self.bs_list:
            # dynamic=False：按这个批大小的确切形状编，不生成带符号形状的通用代码
            compiled = torch.compile(self.model.forward, backend=self._inductor,
                                     dynamic=False, fullgraph=True)
            with self.ctx.forward_batch(self._static[bs]), torch.inference_mode():
                compiled()  # 第一次调用时编译
            self._compiled[bs] = compiled

    def can_replay(self, batch: Batch) -> bool:
        """这一批能走录好的图吗：decode 批，补齐后的大小正好录过。"""
        return batch.is_decode and batch.padded_size in self._static

    def pad_batch(self, batch: Batch) -> None:
        """设 batch.padded_reqs：能走图的批补上占位请求，凑到 bs_list 里不小于它的第一个大小。"""
        if not (self.bs_list and batch.is_decode and batch.size <= self.bs_list[-1]):
            batch.padded_reqs = batch.reqs
            return
        bs = next(bs for bs in self.bs_list if bs >= batch.size)
        batch.padded_reqs = batch.reqs + [self.dummy_req] * (bs - batch.size)

    def replay(self, batch: Batch) -> torch.Tensor:
        """拷输入进缓冲区、放一遍录好的这一步；返回真实请求的 logits [batch.size, vocab]。"""
        bs = batch.padded_size
        assert self.can_replay(batch), (batch, bs)
        self.inputs.fill(batch)
        static = self._static[bs]
        self.attn_backend.prepare_for_replay(static, batch)
        if bs in self._graphs:
            self._graphs[bs].replay()
            return self._outputs[bs][: batch.size]
        # 录好的那份应当一直能用：若因为哪个 Python 值变了而要重编，宁可报错也不悄悄花几秒重编
        with self.ctx.forward_batch(static), torch.compiler.set_stance("fail_on_recompile"):
            return self._compiled[bs]()[: batch.size]

    def destroy(self) -> None:
        """释放图和编译结果（GPU 上还有图占的内存池）。"""
        self._graphs.clear()
        self._outputs.clear()
        if self._compiled:
            self._compiled.clear()
            torch._dynamo.reset()  # 挂在 model.forward 字节码上的编译结果也丢掉，下一个 Engine 从头编

