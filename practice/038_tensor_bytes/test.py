"""练习 038 的评测：每种类型的随机张量（含 NaN 的比特、-0.0、不连续的切片）与参考实现逐字节比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
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


# NaN 的比特：指数全 1、最高位的尾数（quiet 位）是 1，其余的尾数和符号随机
NAN_BITS = {"float16": (0x7E00, 0x01FF, 16), "bfloat16": (0x7FC0, 0x003F, 16),
            "float32": (0x7FC00000, 0x003FFFFF, 32), "float64": (0x7FF8000000000000, 0x0007FFFFFFFFFFFF, 64)}


def random_nan_bits(rng: random.Random, name: str) -> int:
    """一个带自己比特的 NaN（按有符号整数给出，好写进 view 成整数的张量）。"""
    base, payload, width = NAN_BITS[name]
    bits = base | rng.randint(0, payload) | (rng.randrange(2) << (width - 1))
    return bits - (1 << width) if bits >> (width - 1) else bits


def random_tensor(g: torch.Generator, rng: random.Random, name: str, n: int) -> torch.Tensor:
    dtype = TORCH[name]
    if name == "bool":
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g, dtype=torch.float64) * 1e3).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def add_specials(rng: random.Random, t: torch.Tensor, name: str) -> None:
    """在 t（可能是切片）随机的位置上写 -0.0、±inf 和带自己比特的 NaN：4 个以上元素时四种都有。"""
    n = t.shape[0]
    if name not in BITS or n == 0:
        return
    kinds = ["-0.0", "inf", "-inf", "nan"] if n >= 4 else []
    kinds += [rng.choice(["-0.0", "inf", "-inf", "nan"]) for _ in range(rng.randint(0, min(n, 4)))]
    bits = t.view(BITS[name])  # 同样宽的整数：和 t 是同一块内存
    for i, kind in zip(rng.sample(range(n), min(n, len(kinds))), kinds):
        if kind == "nan":
            bits[i] = random_nan_bits(rng, name)
        else:
            t[i] = float(kind)


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
    rng = random.Random(SEED)
    for name in TORCH:
        # (元素个数, 步长, 起点)：0 个元素、只有一个元素的切片，再加几组随机的长度、步长和起点
        cases = [(0, rng.randint(1, 3), rng.randint(0, 3)), (1, rng.randint(2, 4), rng.randint(0, 3)),
                 (rng.randint(2, 9), 1, 0)]
        cases += [(rng.choice([rng.randint(2, 9), rng.randint(10, 1500)]), rng.randint(1, 4), rng.randint(0, 5))
                  for _ in range(5)]
        for n, stride, offset in cases:
            t = random_tensor(g, rng, name, offset + n * stride)[offset::stride]
            add_specials(rng, t, name)
            context = f"dtype={name}，{n} 个元素" + (f"，不连续（[{offset}::{stride}] 切片）" if stride > 1 else
                                                       f"（[{offset}:] 切片）" if offset else "")
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

    check_bad_arguments(to_wire, from_wire, rng)


def unsupported_dtypes() -> list:
    """不在 DTYPES 里的 torch 类型：复数，还有这个 torch 里有的无符号宽整数、8 位浮点。"""
    out = [torch.complex64, torch.complex128]
    for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
        dtype = getattr(torch, name, None)
        if isinstance(dtype, torch.dtype):
            try:
                torch.zeros(2, dtype=dtype)
            except (RuntimeError, TypeError):
                continue
            out.append(dtype)
    return out


# 不认识的类型名：不在 DTYPES 里的 torch 类型、写法不对的、根本不是类型的
NOT_TORCH_NAMES = ["object", "torch.float32", "Float32", "float32 ", "int128", "", "str", "bytes"]


def check_bad_arguments(to_wire, from_wire, rng: random.Random) -> None:
    """坏参数：形状、类型、类型名、buffer 的长度都随机（差一个字节，或者差得多）。"""
    for dims in rng.sample([0, 2, 2, 3], 4):  # 不是一维：0 维、二维（也有一行 / 一列的）、三维
        shape = {0: (), 2: rng.choice([(rng.randint(2, 4), rng.randint(2, 4)), (1, rng.randint(1, 5)),
                                       (rng.randint(1, 5), 1)]), 3: (2, rng.randint(1, 3), 2)}[dims]
        dtype = TORCH[rng.choice(list(TORCH))]
        check_raises(ValueError, to_wire, torch.zeros(shape, dtype=dtype),
                     what=f"tensor_to_wire(形状 {shape} 的 {str(dtype).removeprefix('torch.')} 张量：不是一维)")
    bad_types = unsupported_dtypes()
    others = [d for d in bad_types if not d.is_complex]
    for dtype in rng.sample(bad_types, min(3, len(bad_types))) + ([rng.choice(others)] if others else []):
        check_raises(ValueError, to_wire, torch.zeros(rng.randint(0, 5), dtype=dtype),
                     what=f"tensor_to_wire({str(dtype).removeprefix('torch.')} 的一维张量：类型不在 DTYPES 里)")
    names = rng.sample(NOT_TORCH_NAMES, 3) + [str(rng.choice(bad_types)).removeprefix("torch.")]
    for name in names:
        size = 16 * rng.randint(0, 3)  # 对哪种元素大小都是整数倍：只有类型名是错的
        check_raises(ValueError, from_wire, {"dtype": name, "buffer": bytes(size)},
                     what=f"tensor_from_wire(dtype={name!r}，{size} 个字节)（不认识的类型名）")
    wide = [name for name, dtype in TORCH.items() if torch.empty(0, dtype=dtype).element_size() > 1]
    for name in rng.sample(wide, 4):
        size = torch.empty(0, dtype=TORCH[name]).element_size()
        length = size * rng.choice([0, rng.randint(1, 3), rng.randint(4, 300)]) + rng.randint(1, size - 1)
        buffer = rng.choice([bytes, bytearray])(rng.randbytes(length))
        check_raises(ValueError, from_wire, {"dtype": name, "buffer": buffer},
                     what=f"tensor_from_wire({name}，{length} 个字节)（不是元素大小 {size} 的整数倍）")

if __name__ == "__main__":
    main(run)
