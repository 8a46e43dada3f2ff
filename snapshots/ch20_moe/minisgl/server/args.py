"""命令行参数：`python -m minisgl --model-path ... --port ...` 变成一个 ServerArgs。

ServerArgs 就是 SchedulerConfig 再加上服务器自己的几项（地址、端口、是否进 shell），
所以同一个对象原样交给每个调度器进程。旗标的名字和上游一样（--model-path、--tp-size……）。
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import torch

from minisgl.distributed import DistributedInfo
from minisgl.layers.quant import CPU_KERNELS, QUANTIZATIONS
from minisgl.scheduler import SchedulerConfig
from minisgl.utils.mp import ipc_addr


@dataclass(frozen=True)
class ServerArgs(SchedulerConfig):
    # 服务时有好几个客户端在流式地等：长提示切成小块，两块之间让在跑的请求 decode 一步，
    # 每个流最多等一块的时间（离线的 LLM 照旧是上游的默认：大预算、prefill 优先）
    max_extend_tokens: int = 256
    decode_between_chunks: bool = True
    server_host: str = "127.0.0.1"
    server_port: int = 1919  # 和上游一样的默认端口
    shell_mode: bool = False  # True：不开 HTTP，在终端里多轮对话
    startup_timeout: float = 600.0  # 子进程（加载模型）最多等这么多秒还没就绪，就报错退出
    node_rank: int = 0  # 多机时这台机器是第几台；只有 0 号机器有 API server 和 tokenizer 进程
    # 有请求在等、后端却这么多秒一点回复都没有：当它卡住了（见 frontend.FrontendManager）
    watchdog_timeout: float = 60.0

    # 进程之间的 ZMQ 地址都在 ipc_dir 里（见 SchedulerConfig）；API server 自己绑定 "frontend"
    @property
    def zmq_frontend_addr(self) -> str:
        assert self.ipc_dir is not None, "ipc_dir 还没设置：由启动器在启动子进程之前填上"
        return ipc_addr(self.ipc_dir, "frontend")

    @property
    def zmq_tokenizer_addr(self) -> str:
        # 一个进程既分词又反分词（上游 num_tokenizer=0 的默认做法）：API server 和调度器
        # 推给同一个地址
        return self.zmq_detokenizer_addr


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_CACHE_TYPES = ("radix", "naive")


class _ChineseArgumentParser(argparse.ArgumentParser):
    """帮助和报错说中文。argparse 自己的几句常见报错按模式换成中文，认不出的原样保留。"""

    _TRANSLATIONS = [
        (r"the following arguments are required: (.*)", r"缺少必需的参数：\1"),
        (r"unrecognized arguments: (.*)", r"不认识的参数：\1"),
        (r"argument (\S+): expected one argument", r"参数 \1 后面要跟一个值"),
        (r"argument (\S+): invalid int value: (.*)", r"参数 \1 要一个整数，收到 \2"),
        (r"argument (\S+): invalid float value: (.*)", r"参数 \1 要一个数，收到 \2"),
        (r"argument (\S+): invalid choice: (.*?) \(choose from (.*)\)", r"参数 \1 不能取 \2，可选：\3"),
        (r"argument (\S+): (.*)", r"参数 \1：\2"),  # 我们自己的 type 函数给的中文说明
    ]

    def format_usage(self) -> str:
        return super().format_usage().replace("usage:", "用法：", 1)

    def format_help(self) -> str:
        return super().format_help().replace("usage:", "用法：", 1)

    def error(self, message: str) -> NoReturn:
        for pattern, replacement in self._TRANSLATIONS:
            if re.fullmatch(pattern, message):
                message = re.sub(pattern, replacement, message)
                break
        self.print_usage(sys.stderr)
        self.exit(2, f"错误：{message}（{self.prog} -h 查看全部参数）\n")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"要一个整数，收到 {text!r}") from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"要 ≥ 1 的整数，收到 {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"要 ≥ 0 的整数，收到 {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"要一个数，收到 {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"要 > 0 的数，收到 {text}")
    return value


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"端口要在 1–65535 之间，收到 {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _ChineseArgumentParser(
        prog="python -m minisgl", usage="%(prog)s [选项]", add_help=False,
        description="mini-sglang 的 OpenAI 兼容服务器（不给 --model-path 时用书里内置的 SmolLM2）。")
    g = p.add_argument_group("模型")
    g.add_argument("--model-path", "--model", dest="model_path", default=None,
                   help="Hugging Face 格式的模型目录；不给就用内置的 SmolLM2-135M-Instruct")
    g.add_argument("--dtype", choices=list(_DTYPES), default="float32",
                   help="权重和计算的精度（默认 float32，和 Hugging Face 的参照逐 token 对得上）")
    g.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=_positive_int,
                   default=1, help="张量并行的 rank 数：每个 rank 一个调度器进程（默认 1）")
    g.add_argument("--attention-backend", dest="attention_backend", default=ServerArgs.attention_backend,
                   help="注意力后端：torch（SDPA）、paged（C++，隔着页表读 KV 池）、"
                        "两个名字 prefill 的,decode 的（例如 torch,paged），或 auto"
                        f"（默认 {ServerArgs.attention_backend}：CPU 上是 torch,paged）")
    g.add_argument("--cpu-kernels", dest="cpu_kernels", choices=list(CPU_KERNELS),
                   default=ServerArgs.cpu_kernels,
                   help="本书的 C++ 算子：torch（不用，全是 torch 的算子）、cpp（decode 的线性层走 C++ GEMV，"
                        "RMSNorm 和残差相加一趟做完），或 auto（默认：CPU、float32 上是 cpp）")
    g.add_argument("--quantization", choices=list(QUANTIZATIONS), default=None,
                   help="权重量化（只在 CPU 上）：int8 或 int4，每 32 个权重一组共用缩放（默认不量化）")
    g.add_argument("--moe-backend", dest="moe_backend", default=ServerArgs.moe_backend,
                   help="MoE 模型的专家怎么算：loop（挨个专家）、fused（排好块，一个 C++ 算子算完），"
                        f"或 auto（默认 {ServerArgs.moe_backend}：编得出 C++ 算子的 CPU 上是 fused）")
    g.add_argument("--ep-size", "--expert-parallel-size", dest="ep_size", type=_positive_int, default=1,
                   help="专家并行：1（默认，每个专家按 TP 切）或等于 --tp-size（每个 rank 放一部分完整的专家）")
    g.add_argument("--compile-cpp-wrapper", dest="compile_cpp_wrapper", action="store_true",
                   help="CPU 上编译 decode 时，用 C++ 写调用各个内核的外壳（一步短时快一截，第一次编译慢一倍多）")
    g.add_argument("--cuda-graph-max-bs", "--graph", dest="cuda_graph_max_bs", type=_non_negative_int,
                   default=None, help="decode 录图（GPU 上 CUDA 图，CPU 上 torch.compile）录到多大的批："
                                      "1、2、4，再每 8 个一档；0 表示不录（默认 GPU 上 160，CPU 上 0）")
    g = p.add_argument_group("多机张量并行（和 SGLang 的旗标一样；每台机器上跑同一条命令，只有 --node-rank 不同）")
    g.add_argument("--nnodes", type=_positive_int, default=1,
                   help="rank 分布在几台机器上（默认 1）；每台 tp_size / nnodes 个 rank")
    g.add_argument("--node-rank", type=int, default=0,
                   help="这台机器是第几台（从 0 数起）；0 号机器跑 API server、tokenizer 和 rank 0")
    g.add_argument("--dist-init-addr", default=None,
                   help="0 号机器的 地址:端口，各 rank 在这里会合（多机时必须给；端口 + 1 用来转发消息）")
    g.add_argument("--dist-timeout", dest="distributed_timeout", type=_positive_float,
                   default=ServerArgs.distributed_timeout,
                   help="一次集合通信最多等几秒：某个 rank 死了或卡住，别的 rank 在这个时间内报错退出"
                        f"（默认 {ServerArgs.distributed_timeout:.0f}）")
    g = p.add_argument_group("调度与 KV 缓存")
    g.add_argument("--max-running-requests", dest="max_running_req", type=_positive_int,
                   default=ServerArgs.max_running_req, help="同时在跑的请求数上限")
    g.add_argument("--num-pages", dest="num_page_override", type=_positive_int, default=None,
                   help="KV 池的页数（默认按 --memory-ratio 从剩余内存里算）")
    g.add_argument("--page-size", type=_positive_int, default=ServerArgs.page_size,
                   help="每页多少个 token")
    g.add_argument("--memory-ratio", type=float, default=ServerArgs.memory_ratio,
                   help="加载完权重后，剩余内存的多大比例给 KV 池")
    g.add_argument("--cache-type", choices=_CACHE_TYPES, default=ServerArgs.cache_type,
                   help="前缀缓存：radix（默认，多轮对话复用前缀）或 naive（不缓存）")
    g.add_argument("--max-prefill-length", "--max-extend-length", dest="max_extend_tokens",
                   type=_positive_int, default=ServerArgs.max_extend_tokens,
                   help="一步 prefill 最多算多少个 token（更长的提示分块算；"
                        f"默认 {ServerArgs.max_extend_tokens}）")
    g.add_argument("--decode-between-chunks", dest="decode_between_chunks", action="store_true",
                   default=ServerArgs.decode_between_chunks,
                   help="长提示的两块之间让在跑的请求 decode 一步（默认打开：流式输出不会被长提示卡住）")
    g.add_argument("--no-decode-between-chunks", dest="decode_between_chunks",
                   action="store_false",
                   help="关掉上一项：prefill 优先，长提示的块一块接一块地算完（上游的顺序）")
    g.add_argument("--max-seq-len-override", type=_positive_int, default=None,
                   help="单个请求最长多少个 token（提示 + 生成）；默认取模型的上限")
    g = p.add_argument_group("服务")
    g.add_argument("--host", dest="server_host", default=ServerArgs.server_host,
                   help=f"监听的地址（默认 {ServerArgs.server_host}）")
    g.add_argument("--port", dest="server_port", type=_port, default=ServerArgs.server_port,
                   help=f"监听的端口（默认 {ServerArgs.server_port}）")
    g.add_argument("--watchdog-timeout", type=_positive_float, default=ServerArgs.watchdog_timeout,
                   help="有请求在等、后端却这么多秒没有任何回复，就当它卡住了：等待的请求得到 503，"
                        f"/health 报 503，服务器退出（默认 {ServerArgs.watchdog_timeout:.0f}）")
    g.add_argument("--shell-mode", action="store_true",
                   help="不开 HTTP 服务，在终端里多轮对话（/reset 清空历史，/exit 退出）")
    g.add_argument("-h", "--help", action="help", help="显示这份帮助并退出")
    return p


def parse_args(argv: list[str] | None = None) -> ServerArgs:
    """命令行 → ServerArgs。参数写错时打印一行中文错误，退出码 2（和 argparse 的惯例一样）。"""
    parser = build_parser()
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    kwargs = vars(ns)
    model_path = kwargs.pop("model_path")
    try:
        kwargs["model_path"] = _resolve_model(model_path)
    except ValueError as e:
        parser.error(str(e))
    kwargs["dtype"] = _DTYPES[kwargs["dtype"]]
    tp_size, node_rank = kwargs.pop("tp_size"), kwargs["node_rank"]
    if not 0 <= node_rank < kwargs["nnodes"]:
        parser.error(f"--node-rank 要在 0 到 {kwargs['nnodes'] - 1} 之间，收到 {node_rank}")
    if kwargs["dist_init_addr"] is not None and not re.fullmatch(r"[^\s:]+:\d{1,5}", kwargs["dist_init_addr"]):
        parser.error(f"--dist-init-addr 要写成 地址:端口（例如 10.0.0.1:5000），收到 {kwargs['dist_init_addr']!r}")
    kwargs["tp_info"] = DistributedInfo(0, tp_size)  # 每个进程的 rank 由启动器改
    if kwargs["shell_mode"]:
        kwargs["max_running_req"] = 1  # 终端里只有一个人在聊：只留一行，省内存
    try:
        args = ServerArgs(**kwargs)
    except ValueError as e:  # 各个 Config 的 __post_init__ 给的中文说明
        parser.error(str(e))
    try:
        args.check_tp_split()  # 切不开这个模型：在起任何进程之前，一行中文说清楚
    except ValueError as e:
        parser.exit(2, f"错误：{e}\n")
    return args


def _resolve_model(model_path: str | None) -> str:
    if model_path is None:
        try:
            from minibook.models import default_model  # 书的工具包：负责准备内置模型
        except ImportError:
            raise ValueError("没有给 --model-path，也找不到书的工具包 minibook（它负责准备内置的 "
                             "SmolLM2）；请用 --model-path 指定一个 Hugging Face 格式的模型目录") from None
        return str(default_model())
    path = Path(model_path).expanduser()
    if not (path / "config.json").is_file():
        raise ValueError(f"--model-path {model_path!r} 不是模型目录：里面没有 config.json")
    return str(path)
