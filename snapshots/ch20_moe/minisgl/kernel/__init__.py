"""本书自己写的 C++ 算子（csrc/*.cpp）：第一次用时编译，之后从缓存加载，登记为 torch.ops.minisgl.*。

编译交给 torch.utils.cpp_extension：它调用 g++ 和 ninja。产物按“源码 + 编译选项 + CPU + torch 和 Python 的版本”
的摘要命名，
放在 $TORCH_EXTENSIONS_DIR（默认 ~/.cache/torch_extensions）下：同样的源码在哪一章的树里都只编一次，
已经编好的直接加载（每次搭树时源码文件都是新拷贝的，交给 ninja 的话它会按修改时间重编）。
算子用 TORCH_LIBRARY 登记，所以 Python 这边不需要绑定代码：加载之后就是 torch.ops.minisgl.名字。
加载之后再给每个算子登记一个 fake 实现（只推输出的形状），torch.compile 才能把它们留在编译出的图里。
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from minisgl.utils import init_logger

logger = init_logger(__name__)

CSRC = Path(__file__).parent / "csrc"
# -march=native：按这台机器的向量指令（AVX2、AVX-512……）编；-fopenmp：ATen 的 parallel_for 和 omp simd 要它；
# -ffast-math：允许重排浮点加法（点积能向量化）、用向量版的 exp。算子里没有 inf、nan（分数都是有限的数）
# -fno-reciprocal-math：但除法不许改写成别的式子。linear.cpp 量化 x 时的 1 / d 要和 quant.py 逐位相同：
# 改写成 127 / amax 之类，差一位就让恰好落在 .5 上的数取到相邻的刻度
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-ffast-math", "-fno-reciprocal-math"]

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


def _build_key(sources: list[Path]) -> str:
    """源码、编译选项、CPU 的指令集、torch 和 Python 的版本：任何一样变了，编出来的库就不能再用。"""
    parts = [p.read_bytes() for p in sources] + [" ".join(CFLAGS).encode(), _cpu_flags(),
                                                 torch.__version__.encode(), str(torch.version.git_version).encode(),
                                                 str(sys.version_info[:2]).encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def _missing_tool() -> str | None:
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"找不到 C++ 编译器 {compiler}"
    if shutil.which("ninja") is None:
        try:
            import ninja  # noqa: F401  pip 装的 ninja 把可执行文件放在 venv 的 bin/ 里
        except ImportError:
            return "找不到 ninja（pip install ninja）"
    return None


def _first_error(text: str) -> str:
    """编译失败时异常的全文很长，最后一行总是 ninja 的“subcommand failed”：挑出真正说明原因的那一行。"""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower() or "not found" in line.lower():
            return line[:200]
    return lines[-1][:200] if lines else "原因不明"


def load_or_build(name: str, sources: list[Path], **options) -> None:
    """$TORCH_EXTENSIONS_DIR/name 下有编好的库就加载（执行其中 TORCH_LIBRARY 的登记），否则用
    cpp_extension.load 编译；options 是它的编译选项。name 里应当带源码和选项的摘要（_build_key）。"""
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    build_dir = root / name
    library, lock = build_dir / f"{name}.so", build_dir / "lock"
    # 同样的源码编过了（而且没有别的进程正在编：编的时候目录里有 lock 文件）：直接加载
    if library.exists() and not lock.exists():
        torch.ops.load_library(str(library))
        return
    if lock.exists() and time.time() - lock.stat().st_mtime > 600:
        raise KernelsUnavailable(f"{lock} 是十分钟前一次没编完的编译留下的（进程被杀了？），删掉它再试")
    if (missing := _missing_tool()) is not None:
        raise KernelsUnavailable(missing)
    from torch.utils import cpp_extension

    logger.info("第一次用 %s：编译中（十几秒，之后从缓存 %s 加载）", name, build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(name=name, sources=[str(p) for p in sources], build_directory=str(build_dir),
                       is_python_module=False,  # 只要它在加载时执行 TORCH_LIBRARY 的登记
                       verbose=False, **options)


def load_kernels() -> None:
    """编译（或从缓存加载）csrc/ 里的全部算子。做不到时抛 KernelsUnavailable，带一句中文原因。"""
    global _failure, _loaded
    if _loaded:
        return
    if _failure is not None:
        raise KernelsUnavailable(_failure)
    sources = sorted(CSRC.glob("*.cpp"))
    try:
        load_or_build(f"minisgl_kernels_{_build_key(sources)}", sources, extra_cflags=CFLAGS,
                      extra_ldflags=["-fopenmp"])
    except Exception as e:  # 编译器、ninja 缺了或者编译出错：原因写进一行
        reason = str(e) if isinstance(e, KernelsUnavailable) else _first_error(str(e) or type(e).__name__)
        _failure = f"本书的 C++ 算子编译不了（{reason}）"
        raise KernelsUnavailable(_failure) from e
    _register_fakes()
    _loaded = True


def _register_fakes() -> None:
    """torch.compile 追踪时不真的运行算子，只要知道输出的形状和 dtype。"""

    @torch.library.register_fake("minisgl::paged_attention")
    def _(q, k_cache, v_cache, page_table, rows, qo_indptr, seq_lens_k, scale):
        return torch.empty_like(q)

    # 小批量线性层（linear.cpp）：输出 [x 的行数, 权重的行数]；量化的两个传进来的是交错的块和行数 n
    torch.library.register_fake("minisgl::linear_f32")(lambda x, w: x.new_empty(x.shape[0], w.shape[0]))
    torch.library.register_fake("minisgl::linear_int8")(lambda x, blocks, n: x.new_empty(x.shape[0], n))
    torch.library.register_fake("minisgl::linear_int4")(lambda x, blocks, n: x.new_empty(x.shape[0], n))
    # RMSNorm（rms_norm.cpp）：输出是和 x 同形状的连续张量；带残差的版本还返回 x + residual
    torch.library.register_fake("minisgl::rms_norm")(lambda x, w, eps: x.new_empty(x.shape))
    torch.library.register_fake("minisgl::add_rms_norm")(lambda x, r, w, eps: (x.new_empty(x.shape),
                                                                              x.new_empty(x.shape)))
    # MoE（moe.cpp）：输出和 x 同形状
    torch.library.register_fake("minisgl::fused_moe")(lambda x, w1, w2, tw, ids, experts, bs: x.new_empty(x.shape))


def kernels_available() -> bool:
    try:
        load_kernels()
    except KernelsUnavailable:
        return False
    return True


CUDA_SRC = Path(__file__).parent / "cuda"
_cuda_loaded = False


def load_cuda_kernels() -> None:
    """有 CUDA 的机器上：编译（或从缓存加载）cuda/*.cu，给 rms_norm、add_rms_norm、store_kv 登记 CUDA 实现。

    签名在 CPU 那份库（和 mha_pool.py）里登记，所以先 load_kernels()。缓存同样交给 load_or_build，
    库名里再加上 CUDA 的版本。examples/gpu_smoke.py 用它。
    """
    global _cuda_loaded
    if _cuda_loaded:
        return
    if not torch.cuda.is_available():
        raise KernelsUnavailable("没有可用的 GPU：CUDA 版本的算子用不了")
    load_kernels()
    import minisgl.kvcache.mha_pool  # noqa: F401  store_kv 的签名在这里登记

    sources = sorted(CUDA_SRC.glob("*.cu"))
    name = f"minisgl_cuda_kernels_{_build_key(sources)}_{str(torch.version.cuda).replace('.', '')}"
    try:
        load_or_build(name, sources, extra_cuda_cflags=["-O3"])
    except Exception as e:
        reason = str(e) if isinstance(e, KernelsUnavailable) else _first_error(str(e) or type(e).__name__)
        raise KernelsUnavailable(f"CUDA 版本的算子编译不了（{reason}）") from e
    _cuda_loaded = True
