"""EngineConfig：建一个 Engine 需要知道的全部设置。"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import torch

from minisgl.attention import validate_attention_backend
from minisgl.distributed import DistributedInfo
from minisgl.layers.quant import CPU_KERNELS, QUANTIZATIONS
from minisgl.models import ModelConfig


@dataclass(frozen=True)
class EngineConfig:
    model_path: str | Path  # Hugging Face 格式的模型目录：config.json + *.safetensors
    tp_info: DistributedInfo = field(default_factory=lambda: DistributedInfo(0, 1))
    dtype: torch.dtype = torch.float32  # CPU 上默认 float32，和 HF 的参照逐 token 对得上
    device: str | None = None  # None：有 CUDA 用 cuda:rank，否则 CPU
    max_running_req: int = 16  # 同时在跑的请求数上限 = 页表的行数（再加一行占位行）
    page_size: int = 1  # 每页多少个 token
    # "torch"（SDPA）、"paged"（C++，隔着页表读 KV 池）、"prefill 的,decode 的"，或 "auto"：按设备挑
    attention_backend: str = "auto"
    memory_ratio: float = 0.3  # 加载完权重后，把剩余内存的这一比例给 KV 池
    num_page_override: int | None = None  # 直接指定 KV 池的页数（测试、演示时用）
    max_seq_len_override: int | None = None  # 单个请求最长几个 token；默认取模型的上限
    seed: int = 0  # 采样器的随机种子：同样的种子、同样的输入，采样结果可复现
    distributed_port: int = 29500  # TP>1、单机时 rank 之间在 127.0.0.1 的这个端口上会合
    # 多机：rank 0 所在机器的 "地址:端口"，各 rank 到这里会合；None 表示单机（127.0.0.1:distributed_port）
    dist_init_addr: str | None = None
    nnodes: int = 1  # TP 的 rank 分布在几台机器上，每台 tp_size / nnodes 个
    # 一次集合通信（也包括建进程组时等齐所有 rank）最多等这么多秒：某个 rank 死了或卡住，别的 rank
    # 在这个时间内报错退出，不会永远卡在通信里（torch 的默认值是 30 分钟）
    distributed_timeout: float = 60.0
    # 图捕获（GPU 上录 CUDA 图，CPU 上 torch.compile）：录哪些 decode 批大小。cuda_graph_bs 直接给出
    # 列表；否则 1、2、4，再每 8 个一档，录到 cuda_graph_max_bs（默认 GPU 上 160，CPU 上 0：不录）
    cuda_graph_bs: tuple[int, ...] | None = None
    cuda_graph_max_bs: int | None = None
    # “cpp”：用本书的 C++ 算子（x 不超过 8 行的线性层走 GEMV，RMSNorm 连同残差相加一趟做完）；
    # “torch”：全用 torch 的算子；“auto”：CPU 上、float32、C++ 算子编得出来时用 cpp，否则 torch
    cpu_kernels: str = "auto"
    quantization: str | None = None  # None，或 "int8" / "int4"：权重按 32 个一组量化（只在 CPU 上）
    # CPU 上编译 decode 时，inductor 用 C++ 写“依次调用各个内核”的那层外壳（默认用 Python 写）。
    # 一步越短，外壳占的比例越大：int4 的一步省下约 2 ms；代价是第一次编译慢一倍多
    compile_cpp_wrapper: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.memory_ratio <= 1:
            raise ValueError(f"memory_ratio 必须在 (0, 1] 之间，收到 {self.memory_ratio}")
        if self.max_running_req < 1:
            raise ValueError(f"max_running_req 必须 ≥ 1，收到 {self.max_running_req}")
        validate_attention_backend(self.attention_backend)
        if self.page_size < 1:
            raise ValueError(f"page_size 必须 ≥ 1，收到 {self.page_size}")
        for name in ("num_page_override", "max_seq_len_override"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} 必须 ≥ 1，收到 {value}")
        if self.cuda_graph_bs is not None:
            sizes = self.cuda_graph_bs
            if isinstance(sizes, int) or not all(isinstance(bs, int) and bs >= 1 for bs in sizes):
                raise ValueError(f"cuda_graph_bs 必须是 ≥ 1 的整数组成的列表，收到 {sizes!r}")
            object.__setattr__(self, "cuda_graph_bs", tuple(sorted(set(sizes))))
        max_bs = self.cuda_graph_max_bs
        if max_bs is not None and (not isinstance(max_bs, int) or max_bs < 0):
            raise ValueError(f"cuda_graph_max_bs 必须是 ≥ 0 的整数（0 表示不录），收到 {max_bs!r}")
        if self.cpu_kernels not in CPU_KERNELS:
            raise ValueError(f"cpu_kernels 只能是 {'、'.join(CPU_KERNELS)}，收到 {self.cpu_kernels!r}")
        if self.quantization is not None:
            if self.quantization not in QUANTIZATIONS:
                raise ValueError(f"quantization 只能是 {'、'.join(QUANTIZATIONS)}，收到 {self.quantization!r}")
            if self.cpu_kernels == "torch":
                raise ValueError("量化的权重要用本书的 C++ 算子来乘：cpu_kernels 不能是 torch")
            if self.dtype != torch.float32:
                raise ValueError(f"量化只支持 float32 的模型（激活和缩放都是 float32），收到 {self.dtype}")
        if not isinstance(self.compile_cpp_wrapper, bool):
            raise ValueError(f"compile_cpp_wrapper 必须是 True 或 False，收到 {self.compile_cpp_wrapper!r}")
        if not 0 < self.distributed_timeout:
            raise ValueError(f"distributed_timeout 必须 > 0 秒，收到 {self.distributed_timeout}")
        if self.nnodes < 1 or self.tp_info.size % self.nnodes != 0:
            raise ValueError(f"{self.tp_info.size} 个 TP rank 没法平均分到 {self.nnodes} 台机器上")
        if self.nnodes > 1 and self.dist_init_addr is None:
            raise ValueError("多机（nnodes > 1）要给 dist_init_addr：rank 0 所在机器的 地址:端口")

    @property
    def local_ranks(self) -> int:
        """这台机器上有几个 rank：它们分这台机器的 CPU 核和内存。"""
        return self.tp_info.size // self.nnodes

    @property
    def dist_init_method(self) -> str:
        """torch.distributed 的会合地址：rank 0 在这里开一个 TCPStore，其他 rank 连过来。"""
        return f"tcp://{self.dist_init_addr or f'127.0.0.1:{self.distributed_port}'}"

    @functools.cached_property
    def model_config(self) -> ModelConfig:
        return ModelConfig.from_json(self.model_path)

    @property
    def max_seq_len(self) -> int:
        if self.max_seq_len_override is not None:
            return self.max_seq_len_override
        return self.model_config.max_position_embeddings

    def check_tp_split(self) -> None:
        """tp_size 切得开这个模型吗？切不开时抛 ValueError，用一句中文说清是哪个数。

        启动器在起任何进程之前调用它；Engine 建层之前也调用（不经过启动器的用法）。
        """
        n = self.tp_info.size
        if n == 1:  # 一个 rank 什么都不用切（也就不必读 config.json：读不了的交给加载时报）
            return
        if (problem := tp_split_problem(self.model_config, n)) is not None:
            usable = [k for k in range(1, 65) if tp_split_problem(self.model_config, k) is None]
            raise ValueError(f"--tp-size {n} 切不开这个模型：{problem}"
                             f"（能用的 TP 数：{'、'.join(map(str, usable))}）")


def tp_split_problem(c: ModelConfig, n: int) -> str | None:
    """n 个 rank 切不开这个模型时说出是哪个数；切得开返回 None。

    query 头、MLP 中间维要平分；KV 头要么平分，要么每个复制到几个 rank 上（n 是 KV 头数的整数倍）。
    词表不要求整除（最后一个 rank 补零行），hidden 维不切。
    """
    kv_ok = c.num_kv_heads % n == 0 or n % c.num_kv_heads == 0
    for what, count, ok in (("query 头", c.num_qo_heads, c.num_qo_heads % n == 0),
                            ("KV 头", c.num_kv_heads, kv_ok),
                            ("MLP 中间维", c.intermediate_size, c.intermediate_size % n == 0)):
        if not ok:
            return f"{what}有 {count} 个，不能平均分给 {n} 个 rank"
    return None
