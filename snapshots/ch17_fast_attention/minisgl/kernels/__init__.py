"""本书自己写的 C++ 算子（csrc/*.cpp）：第一次用时编译，之后从缓存加载，登记为 torch.ops.minisgl.*。

编译交给 torch.utils.cpp_extension：它调用 g++ 和 ninja。产物按“源码 + 编译选项 + CPU”的摘要命名，
放在 $TORCH_EXTENSIONS_DIR（默认 ~/.cache/torch_extensions）下：同样的源码在哪一章的树里都只编一次，
已经编好的直接加载（每次搭树时源码文件都是新拷贝的，交给 ninja 的话它会按修改时间重编）。
算子用 TORCH_LIBRARY 登记，所以 Python 这边不需要绑定代码：加载之后就是 torch.ops.minisgl.名字。
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

CSRC = Path(__file__).parent / "csrc"
# -march=native：按这台机器的向量指令（AVX2、AVX-512……）编；-fopenmp：ATen 的 parallel_for 和 omp simd 要它
CFLAGS = ["-O3", "-march=native", "-fopenmp"]

_failure: str | None = None  # 编译失败过：原因。同一个进程里不再重试
_loaded = False


class KernelsUnavailable(RuntimeError):
    """这台机器编不出本书的 C++ 算子（没有编译器、没有 ninja……）。"""


def _cpu_flags() -> bytes:
    """这台 CPU 支持的指令集：-march=native 编出来的库只能在同样的 CPU 上跑，缓存要按它分开。"""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line.encode()
    except OSError:
        pass
    return b""


def load_kernels() -> None:
    """编译（或从缓存加载）csrc/ 里的全部算子。做不到时抛 KernelsUnavailable，带一句中文原因。"""
    global _failure, _loaded
    if _loaded:
        return
    if _failure is not None:
        raise KernelsUnavailable(_failure)
    sources = sorted(CSRC.glob("*.cpp"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources) + " ".join(CFLAGS).encode() + _cpu_flags())
    name = f"minisgl_kernels_{digest.hexdigest()[:12]}"
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    build_dir = root / name
    library = build_dir / f"{name}.so"
    try:
        # 同样的源码编过了（而且没有别的进程正在编：编的时候目录里有 lock 文件）：直接加载，执行 TORCH_LIBRARY 的登记
        if library.exists() and not (build_dir / "lock").exists():
            torch.ops.load_library(str(library))
        else:
            from torch.utils import cpp_extension

            build_dir.mkdir(parents=True, exist_ok=True)
            cpp_extension.load(
                name=name,
                sources=[str(p) for p in sources],
                extra_cflags=CFLAGS,
                extra_ldflags=["-fopenmp"],
                build_directory=str(build_dir),
                is_python_module=False,  # 只要它在加载时执行 TORCH_LIBRARY 的登记
                verbose=False,
            )
    except Exception as e:  # 编译器、ninja 缺了或者编译出错：原因写进一行
        reason = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        _failure = f"本书的 C++ 算子编译不了（{reason}）"
        raise KernelsUnavailable(_failure) from e
    _loaded = True


def kernels_available() -> bool:
    try:
        load_kernels()
    except KernelsUnavailable:
        return False
    return True
