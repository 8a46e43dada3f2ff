"""和设备、数据类型有关的小工具。

全书默认跑在 CPU 上，有 CUDA 时走 GPU。这里的函数只看设备的"名字"，
不会去初始化 CUDA，所以在没有 GPU 的机器上也能放心调用。
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


def is_cuda(device: torch.device | str) -> bool:
    """device 是不是一块 CUDA 设备（"cuda"、"cuda:1" 都算）。只解析名字，不碰 GPU。"""
    return torch.device(device).type == "cuda"


def to_device(values, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """把 CPU 上的数（列表或 CPU 张量）交给设备，不让 CPU 停下来等。

    ``torch.tensor(列表, device="cuda")`` 从普通（可换页）内存拷贝，CPU 要等拷贝做完才返回。
    先放进锁页内存再 ``non_blocking=True``：拷贝排进流里就返回，同一条流上后面的内核一定在它之后执行；
    拷完之前，PyTorch 的锁页内存池不会把那块内存挪作他用。CPU 上就是普通的张量，什么都不变。
    """
    if not is_cuda(device):
        return torch.as_tensor(values, dtype=dtype, device=device)
    host = torch.as_tensor(values, dtype=dtype).pin_memory()
    return host.to(device, non_blocking=True)


def device_of(rank: int = 0, device_type: str | None = None) -> torch.device:
    """第 rank 个 TP 进程应该用的设备。

    device_type 为 None 时自动选择：有 CUDA 就用 ``cuda:rank``（一个 rank 一块卡），
    否则用 CPU（所有 rank 共用 CPU，由线程数划分）。
    """
    if device_type is None:
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if device_type == "cpu":
        return torch.device("cpu")
    if device_type != "cuda":
        raise ValueError(f"不支持的设备类型 {device_type!r}，只能是 'cpu' 或 'cuda'")
    if not torch.cuda.is_available():
        raise RuntimeError("要求使用 CUDA，但这台机器上没有可用的 CUDA 设备")
    if not 0 <= rank < torch.cuda.device_count():
        raise RuntimeError(
            f"rank {rank} 没有对应的 GPU：这台机器只有 {torch.cuda.device_count()} 块"
        )
    return torch.device("cuda", rank)


@contextmanager
def torch_dtype(dtype: torch.dtype) -> Iterator[None]:
    """在 with 块里临时把 torch 的默认浮点类型设为 dtype，离开时恢复。

    建模型时用它：层里 ``torch.empty(...)`` 创建的权重直接就是目标精度，
    不必先按 float32 分配一遍再转换。
    """
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)
