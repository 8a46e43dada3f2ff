"""练习 038 的评测：每种类型的随机张量（含 NaN 的比特、-0.0、不连续的切片）与参考实现逐字节比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, check_tensor, check_type, main, require, short, seed, in_child, call_kept

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
# 每种类型：struct 的格式字符（小端）；bfloat16 与 float16 的比特借 16 位无符号整数表示
FORMATS = {"bool": "?", "uint8": "B", "int8": "b", "int16": "h", "int32": "i", "int64": "q",
           "float16": "H", "bfloat16": "H", "float32": "I", "float64": "Q"}
TORCH = {"bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
         "int32": torch.int32, "int64": torch.int64, "float16": torch.float16,
         "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
BITS = {"float16": torch.int16, "bfloat16": torch.int16, "float32": torch.int32, "float64": torch.int64}


def reference_bytes(t: torch.Tensor, name: str) -> bytes:
    """逐个元素用 struct 打包：浮点数按它的比特（整数）打包，和 torch 的内存布局无关。"""
    fmt = FORMATS[name]
    if name in BITS:
        mask = (1 << (8 * struct.calcsize(fmt))) - 1
        values = [v & mask for v in t.view(BITS[name]).tolist()] if t.is_contiguous() else \
            [v & mask for v in t.contiguous().view(BITS[name]).tolist()]
    else:
        values = t.tolist()
    return struct.pack(f"<{len(values)}{fmt}", *values)


def random_tensor(g: torch.Generator, name: str, n: int) -> torch.Tensor:
    dtype = TORCH[name]
    if name == "bool":
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        t = (torch.randn(n, generator=g, dtype=torch.float64) * 1e3).to(dtype)
        if n >= 4:
            t[:3] = torch.tensor([float("-0.0"), float("inf"), float("-inf")], dtype=dtype)
            bits = t.view(BITS[name])
            bits[3] = {torch.int16: 0x7FC1, torch.int32: 0x7FC00123,
                       torch.int64: 0x7FF8000000000ABC}[BITS[name]]  # 带自己比特的 NaN
        return t
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    name = {v: k for k, v in TORCH.items()}[a.dtype]
    return a.dtype == b.dtype and reference_bytes(a, name) == reference_bytes(b, name)


def run(mod: object) -> None:
    to_wire = require(mod, "tensor_to_wire")
    from_wire = require(mod, "tensor_from_wire")

    d = to_wire(torch.tensor([1.0, -2.0], dtype=torch.bfloat16))
    check_type(d, dict, "tensor_to_wire 的返回值")
    check_equal(d, {"dtype": "bfloat16", "buffer": b"\x80\x3f\x00\xc0"}, "题目里的 bfloat16 例子")
    back = from_wire({"dtype": "int32", "buffer": b"\x01\x00\x00\x00\xff\xff\xff\xff"})
    check_tensor(back, "题目里 int32 例子还原的张量", shape=(2,), dtype=torch.int32)
    check_equal(back.tolist(), [1, -1], "题目里 int32 例子还原的值")

    g = torch.Generator().manual_seed(SEED)
    for name in TORCH:
        for n in (0, 1, 7, 1000):
            for stride in (1, 3):
                t = random_tensor(g, name, n * stride)[::stride]
                context = f"dtype={name}，{n} 个元素" + ("，不连续（[::3] 切片）" if stride > 1 else "")
                before = t.clone()
                d = to_wire(t)
                check_type(d, dict, f"tensor_to_wire 的返回值（{context}）")
                check_equal(d.get("dtype"), name, "dtype 字段", context)
                check_type(d.get("buffer"), bytes, f"buffer 字段（{context}）")
                want = reference_bytes(t, name)
                check_equal(len(d["buffer"]), len(want),
                            "buffer 的字节数（元素个数 × 每个元素的字节数）", context)
                check(d["buffer"] == want, f"buffer 的字节不对（{context}）：应该是 {short(want, 60)}，"
                                           f"你的是 {short(d['buffer'], 60)}")
                check(same_bits(t, before), f"tensor_to_wire 改动了传进来的张量（{context}）")
                back = from_wire({"dtype": name, "buffer": bytearray(want)})
                check_tensor(back, f"tensor_from_wire 的结果（{context}）", shape=(n,), dtype=TORCH[name])
                check(same_bits(back, t), f"tensor_from_wire 还原的比特与原来不同（{context}）")

    # 还原出的张量拥有自己的内存
    # buffer 和结果都留在你的代码的进程里（跨进程传的参数本来都是拷贝），改 buffer 才看得出是不是共用内存
    raw = in_child(from_wire, bytearray(struct.pack("<3i", 5, 6, 7)))
    kept = call_kept(from_wire, {"dtype": "int32", "buffer": raw})
    raw[0:4] = struct.pack("<i", 99)
    check_equal(kept.tolist(), [5, 6, 7], "buffer（bytearray）之后被改了，还原出的张量（应该不跟着变）")
    back = from_wire({"dtype": "int32", "buffer": bytearray(struct.pack("<3i", 5, 6, 7))})
    back[0] = 1  # 可写

    check_raises(ValueError, to_wire, torch.zeros(2, 3), what="tensor_to_wire(2×3 的张量)")
    check_raises(ValueError, to_wire, torch.tensor(5), what="tensor_to_wire(0 维张量)")
    check_raises(ValueError, to_wire, torch.zeros(2, dtype=torch.complex64), what="tensor_to_wire(complex64)")
    check_raises(ValueError, from_wire, {"dtype": "object", "buffer": b""}, what="tensor_from_wire(dtype='object')")
    check_raises(ValueError, from_wire, {"dtype": "int32", "buffer": b"\x00" * 6},
                 what="tensor_from_wire(int32，6 个字节)")


if __name__ == "__main__":
    main(run)
