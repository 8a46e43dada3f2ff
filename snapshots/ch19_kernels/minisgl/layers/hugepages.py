"""把模型的权重搬进一块用大页（2 MB 一页）的内存。

decode 每一步把几百 MB 的权重从头到尾读一遍。CPU 按页把虚拟地址翻译成物理地址，翻译结果缓存在
TLB 里，TLB 只有几千项：4 KB 的页，读 538 MB 要翻译 13 万次，几乎每一页都不在 TLB 里，
每次都要查页表，内存带宽就用不满；2 MB 的页只要 270 次。

Linux 的透明大页（THP）在 /sys/kernel/mm/transparent_hugepage/enabled 是 madvise 时，只给
madvise(MADV_HUGEPAGE) 过的私有匿名内存用大页。torch 的分配器不做这件事，所以我们自己 mmap 一块、
madvise、再把权重拷进去，换掉模型里的引用。系统不给大页（never）时一切照旧，只是慢。
"""

from __future__ import annotations

import mmap
from pathlib import Path

import torch

from .base import BaseOP

ALIGN = 64  # 每块权重的起点按 64 字节（一条缓存行）对齐


def _weight_holders(model: BaseOP) -> list[tuple[object, str, torch.Tensor]]:
    """（对象, 属性名, 张量）：模型里的每个权重，加上线性层"怎么乘"的对象（quant.py）里的张量。"""
    found: list[tuple[object, str, torch.Tensor]] = []

    def walk(op: BaseOP) -> None:
        for name, value in op.named_children():
            if isinstance(value, torch.Tensor):
                found.append((op, name, value))
            else:
                walk(value)
        matmul = getattr(op, "_matmul", None)
        for name, value in vars(matmul).items() if matmul is not None else ():
            if isinstance(value, torch.Tensor):
                found.append((matmul, name, value))

    walk(model)
    return found


def copy_to_huge_pages(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """把这些 CPU 张量依次拷进一块新的、madvise 过的内存，返回拷过去的（连续的）张量，顺序不变。"""
    sizes = [(t.nbytes + ALIGN - 1) // ALIGN * ALIGN for t in tensors]
    # 私有的匿名映射（共享的匿名内存走 shmem，THP 另有开关）；多要 2 MB，让开头不整齐的那页也不亏
    buffer = mmap.mmap(-1, sum(sizes) + (2 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        buffer.madvise(mmap.MADV_HUGEPAGE)  # 要在第一次写之前：缺页时直接分配大页
    arena = torch.frombuffer(buffer, dtype=torch.uint8)  # 张量持有 buffer 的引用：权重活着，内存就在
    copies, offset = [], 0
    for t, size in zip(tensors, sizes):
        copy = arena[offset: offset + t.nbytes].view(t.dtype).view(t.shape)
        copies.append(copy.copy_(t))
        offset += size
    return copies


def move_weights_to_huge_pages(model: BaseOP) -> int:
    """把 model 的全部 CPU 权重拷进大页，换掉所有引用；返回搬了多少字节。

    同一块权重被几处引用（LM head 和词嵌入共用）时只拷一份，几处都指向它。
    """
    holders = [(obj, name, t) for obj, name, t in _weight_holders(model) if t.device.type == "cpu"]
    unique: dict[tuple[int, int], torch.Tensor] = {}
    for _, _, t in holders:
        unique.setdefault((t.data_ptr(), t.nbytes), t)
    if not unique:
        return 0
    moved = dict(zip(unique, copy_to_huge_pages(list(unique.values()))))
    for obj, name, t in holders:
        setattr(obj, name, moved[(t.data_ptr(), t.nbytes)])
    return sum(t.nbytes for t in unique.values())


def huge_page_bytes() -> int:
    """本进程此刻有多少匿名内存在大页上（/proc/self/smaps_rollup 的 AnonHugePages）；读不到时 0。"""
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
