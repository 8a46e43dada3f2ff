"""启动器：`python -m minisgl` 从这里开始。

    主进程（API server）  ──spawn──>  调度器 rank 0 .. n-1（每个 TP rank 一个进程）
                          ──spawn──>  tokenizer 进程（分词 + 反分词）

多机张量并行（--nnodes N）时每台机器跑同一条命令、--node-rank 不同：0 号机器如上，只是调度器
只起本机的那几个 rank；其他机器只起本机的 rank，不开 HTTP，也没有 tokenizer 进程。

子进程用 "spawn" 启动（全新的解释器，不继承主进程的线程和锁）。每个子进程就绪后往
ack 队列里放一条消息；全部到齐才开始服务。之后一个看守线程盯着子进程：谁意外退出，
API server 让等待中的请求立刻得到 503（而不是一直挂着），然后整个服务器以退出码 1 退出
（和 vLLM、SGLang 一样：没有后端的服务器不可能再生成，交给外面的人重启）。

退出（Ctrl-C、SIGTERM、启动失败、后端死了）时：停掉每个子进程、删掉放 IPC 地址的临时目录；
端口随 uvicorn 关闭而释放。启动器自己被 kill -9 时来不及收尾：子进程收到内核代发的 SIGTERM，
退出前替它删掉 IPC 目录。
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection
import os
import queue
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from minisgl.distributed import DistributedInfo
from minisgl.utils import init_logger

from .args import ServerArgs, parse_args

logger = init_logger(__name__)


class StartupError(RuntimeError):
    """服务器没能启动起来（子进程启动时就退出了、等太久、端口被占用）。"""


# ---------------------------------------------------------------------------- 子进程的入口


_IPC_DIR: str | None = None  # 子进程里：退出时删掉这个目录（启动器可能已经死了）


def _prepare_child(ipc_dir: str) -> None:
    """每个子进程一开始做的事：只听启动器的。

    终端里按 Ctrl-C，SIGINT 会发给整个进程组；子进程忽略它，由启动器（主进程）统一收尾：
    先停 HTTP，再给每个子进程发 SIGTERM。SIGTERM 当成 KeyboardInterrupt，走正常的收尾。
    父进程死了（哪怕是 kill -9）：删掉 IPC 目录、立刻退出（见 _exit_now）。
    """
    global _IPC_DIR
    _IPC_DIR = ipc_dir
    parent_pid = mp.parent_process().pid

    def _interrupt(signum, frame):
        if os.getppid() != parent_pid:  # 内核代死去的父进程发来的：没有人要我们的回复了
            _exit_now()  # 不抛 KeyboardInterrupt：它可能落在某个 __del__ 里被吞掉，子进程就永远留下了
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt)
    if sys.platform.startswith("linux"):  # 父进程被 kill -9 时，内核替它给我们发 SIGTERM
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    # 信号处理函数只在主线程回到 Python 字节码时才跑（它可能正卡在一次长前向里），
    # 所以再让一个守护线程盯着父进程：父进程一换人就收尾
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True,
                     name="minisgl-orphan-watch").start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.2)
    _exit_now()


def _run_scheduler(args: ServerArgs, ack_queue) -> None:
    try:
        _prepare_child(args.ipc_dir)
    except KeyboardInterrupt:
        _exit_now()
    import torch

    from minisgl.scheduler import Scheduler
    from minisgl.utils import set_log_rank

    if args.tp_info.size > 1:
        set_log_rank(args.tp_info.rank)  # 多个 rank 的日志混在一个终端里：每行带上 rank

    try:
        with torch.inference_mode():
            scheduler = Scheduler(args)  # 加载模型、建 KV 池、连上 ZMQ
            scheduler.sync_all_ranks()  # 所有 rank 都建好了再报就绪
            ack_queue.put({"who": f"调度器 rank {args.tp_info.rank} 已就绪",
                           "max_seq_len": scheduler.engine.max_seq_len,
                           "num_pages": scheduler.engine.num_pages})
            try:
                scheduler.run_forever()
            finally:
                scheduler.shutdown()
    except KeyboardInterrupt:
        pass  # 启动器叫我们停：安静地退出
    _exit_now()


def _run_tokenizer(ipc_dir: str, ack_queue, limit_queue, **kwargs) -> None:
    try:
        _prepare_child(ipc_dir)
        from minisgl.tokenizer import tokenize_worker  # 慢的 import 和调度器加载模型同时进行

        max_seq_len = limit_queue.get()  # 调度器就绪后，启动器把它的 max_seq_len 转过来
        tokenize_worker(ack_queue=ack_queue, max_seq_len=max_seq_len, **kwargs)
    except KeyboardInterrupt:
        pass
    _exit_now()


def _exit_now() -> None:
    """套接字已经关好、该还的都还了：直接退出，跳过解释器的收尾。

    正常退出时 Python 要逐个析构 torch、transformers 这些模块，要一秒多（机器忙时几秒），
    启动器停服务时就得多等这么久。multiprocessing 用 fork 启动的子进程也是这样用 os._exit 退出的。
    子进程退出就意味着服务在停，所以也删掉 IPC 目录（启动器也删，谁先谁后都行）：启动器被 kill -9 时，
    内核代发的 SIGTERM 可能在我们还没被过继之前就到了，分不清是谁叫我们停的。
    """
    if _IPC_DIR is not None:
        shutil.rmtree(_IPC_DIR, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------------------- 后端：一组子进程


class Backend:
    """后端的子进程：启动、等就绪、看守、全部停掉。"""

    def __init__(self, args: ServerArgs) -> None:
        assert args.ipc_dir is not None
        self.args = args
        self.procs: list[tuple[str, mp.Process]] = []  # (给人看的名字, 进程)
        self.stopping = threading.Event()  # 置位后，子进程退出是意料之中的
        self.ctx = mp.get_context("spawn")
        self.ack_queue = self.ctx.Queue()
        self.limit_queue = self.ctx.Queue()  # 把调度器的 max_seq_len 转给 tokenizer 进程

    def start(self) -> dict:
        """启动本机的子进程，等每个都报就绪。返回调度器报上来的信息（max_seq_len、num_pages）。"""
        args, n = self.args, self.args.tp_info.size
        first = args.node_rank * args.local_ranks  # 本机的 rank：first .. first + local_ranks - 1
        for rank in range(first, first + args.local_ranks):
            rank_args = replace(args, tp_info=DistributedInfo(rank, n))
            self._spawn(f"调度器 rank {rank}", _run_scheduler, (rank_args, self.ack_queue), {})
        if args.node_rank == 0:  # 只有 0 号机器和外界打交道
            self._spawn("tokenizer 进程", _run_tokenizer, (args.ipc_dir, self.ack_queue, self.limit_queue), {
                "tokenizer_path": str(args.model_path), "addr": args.zmq_tokenizer_addr,
                "backend_addr": args.zmq_backend_addr, "frontend_addr": args.zmq_frontend_addr})
        return self._wait_ready()

    def _spawn(self, name: str, target: Callable, call_args: tuple, kwargs: dict) -> None:
        proc = self.ctx.Process(target=target, args=call_args, kwargs=kwargs, name=name,
                                daemon=False)  # 非守护：调度器自己还要起线程
        proc.start()
        self.procs.append((name, proc))
        space = " " if name[0].isascii() else ""  # 中文紧挨着英文时隔一个空格
        logger.info("已启动%s%s（pid %d）", space, name, proc.pid)

    def _wait_ready(self) -> dict:
        timeout = self.args.startup_timeout
        deadline, info = time.monotonic() + timeout, {}
        waiting = len(self.procs)
        while waiting > 0:
            try:
                ack = self.ack_queue.get(timeout=0.2)
            except queue.Empty:
                for name, proc in self.procs:  # 没等到：看看是不是有人已经死了
                    if not proc.is_alive():
                        raise StartupError(f"{name}（pid {proc.pid}）还没就绪就退出了，退出码 "
                                           f"{proc.exitcode}；它的报错在上面的日志里")
                if time.monotonic() > deadline:
                    raise StartupError(f"等了 {timeout:.0f} 秒，还有 {waiting} 个子进程没有就绪")
                continue
            waiting -= 1
            if isinstance(ack, dict) and "error" in ack:  # 子进程发现自己没法服务（如 KV 池太小）
                raise StartupError(ack["error"])
            if isinstance(ack, dict) and "max_seq_len" in ack and not info:
                info = ack
                if self.args.node_rank == 0:  # 这台机器上有 tokenizer 进程在等它
                    self.limit_queue.put(ack["max_seq_len"])
            logger.info("%s", ack["who"] if isinstance(ack, dict) else ack)
        return info

    def watch(self, on_death: Callable[[str], None]) -> None:
        """起一个看守线程：任何一个子进程退出（而且不是我们让它停的），就调用 on_death(原因)。"""

        def _watch() -> None:
            by_sentinel = {proc.sentinel: (name, proc) for name, proc in self.procs}
            ready = mp.connection.wait(list(by_sentinel))  # 阻塞到有进程退出
            if self.stopping.is_set():
                return
            name, proc = by_sentinel[ready[0]]
            proc.join(timeout=1)
            on_death(f"{name}（pid {proc.pid}）意外退出，退出码 {proc.exitcode}")

        threading.Thread(target=_watch, name="minisgl-watch-children", daemon=True).start()

    def stop(self, timeout: float = 5.0) -> None:
        """停掉全部子进程（先 SIGTERM 让它们收尾，超时再 SIGKILL），删掉 IPC 目录。"""
        self.stopping.set()
        for _, proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + timeout
        for name, proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                logger.warning("%s（pid %d）%.0f 秒内没有退出，强行结束", name, proc.pid, timeout)
                proc.kill()
                proc.join(timeout=1)
        for q in (self.ack_queue, self.limit_queue):
            q.close()
            q.join_thread()
        shutil.rmtree(self.args.ipc_dir, ignore_errors=True)


# ---------------------------------------------------------------------------- 入口


def _listen_on(host: str, port: int) -> socket.socket:
    """加载模型之前就占住端口（bind + listen），之后交给 uvicorn。

    只检查一下"现在空着"不够：加载模型的这几十秒里别的程序可能占走它，uvicorn 到时只能打一行
    英文错误。占住之后，加载期间连进来的客户端在队列里等着，就绪后照常得到回答。
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # 和 uvicorn 一样
    try:
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn 的默认 backlog
    except OSError as e:
        sock.close()
        raise StartupError(f"{host}:{port} 用不了（{e.strerror}）：换一个 --port") from None
    return sock


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sigterm_to_exit(signum, frame) -> None:
    raise SystemExit(128 + signum)  # 走 finally：子进程和临时目录照样收拾


def launch_server(argv: list[str] | None = None) -> int:
    """解析命令行，启动后端，服务到被叫停。返回退出码。"""
    from minisgl.utils.mp import new_ipc_dir

    args = parse_args(argv)
    single_host_tp = args.tp_info.size > 1 and args.nnodes == 1  # 本机找一个空端口会合
    args = replace(args, ipc_dir=new_ipc_dir(),
                   distributed_port=_free_port() if single_host_tp else args.distributed_port)
    signal.signal(signal.SIGTERM, _sigterm_to_exit)
    if args.shell_mode:  # 子进程的 INFO 日志（如每次空闲时的 KV 页核对）会混进对话里：只留警告和错误
        os.environ.setdefault("MINISGL_LOG_LEVEL", "WARNING")
    backend = Backend(args)
    logger.info("进程间的 ZMQ 地址放在 %s（退出时删除）", args.ipc_dir)
    frontends = []  # on_ready 记下 FrontendManager：停下之后看是不是因为后端死了
    sock = None
    try:
        sock = None if args.shell_mode or args.node_rank > 0 else _listen_on(args.server_host, args.server_port)
        info = backend.start()
        if args.node_rank > 0:
            return _serve_ranks_only(backend, args)
        from .frontend import ServedModel, connect_frontend

        model = ServedModel(Path(args.model_path).name, str(args.model_path), info["max_seq_len"])

        def connect():
            return connect_frontend(args.zmq_frontend_addr, args.zmq_tokenizer_addr,
                                    args.watchdog_timeout)

        if args.shell_mode:
            import asyncio

            from .shell import run_shell

            asyncio.run(run_shell(connect, model, on_ready=_watcher(backend, frontends)))
        else:
            from .api_server import run_api_server

            stopped_by = run_api_server(model, connect, args.server_host, args.server_port,
                                        on_ready=_watcher(backend, frontends), sock=sock)
            if stopped_by:
                return 128 + stopped_by  # 和被信号结束的进程一样：143、130
            if frontends and frontends[0].backend_error is not None:
                # 后端死了（或卡住了）：服务器不可能再生成，退出让外面的人重启它（vLLM、SGLang 也这样）
                print(f"错误：{frontends[0].backend_error}，服务器退出", file=sys.stderr)
                return 1
        return 0
    except StartupError as e:
        print(f"错误：{e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if sock is not None:
            sock.close()
        backend.stop()
        logger.info("已停止全部子进程")


def _serve_ranks_only(backend: Backend, args: ServerArgs) -> int:
    """1 号及以后的机器：只有本机的 rank。一直等到本机的 rank 意外退出，或者 0 号机器没了。

    rank 0 所在的进程开着会合用的端口（torch.distributed 的 TCPStore），每秒连一下：连不上就是
    rank 0 已经不在了，本机的 rank 等不来任何消息，留着只会空占内存，于是退出（退出码 1）。
    """
    logger.info("本机的 %d 个 rank 已就绪，消息由 0 号机器（%s）转发过来", args.local_ranks,
                args.dist_init_addr)
    died: queue.Queue[str] = queue.Queue()
    backend.watch(died.put)
    host, port = args.dist_init_addr.rsplit(":", 1)
    while True:
        try:
            reason = died.get(timeout=1.0)
            break
        except queue.Empty:
            pass
        try:
            socket.create_connection((host, int(port)), timeout=2.0).close()
        except OSError:
            reason = f"0 号机器的 rank 0（{args.dist_init_addr}）连不上了"
            break
    print(f"错误：{reason}，这台机器上的 rank 全部退出", file=sys.stderr)
    return 1


def _watcher(backend: Backend, frontends: list):
    """返回 on_ready(frontend)：在事件循环里开始看守子进程，死讯经事件循环交给 frontend。"""

    def on_ready(frontend) -> None:
        import asyncio

        frontends.append(frontend)
        loop = asyncio.get_running_loop()

        def on_death(reason: str) -> None:  # 在看守线程里调用：要回到事件循环的线程上执行
            try:
                loop.call_soon_threadsafe(frontend.backend_died, reason)
            except RuntimeError:
                pass  # 事件循环已经关了：服务器正在退出

        backend.watch(on_death)

    return on_ready
