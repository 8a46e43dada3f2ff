"""SchedulerConfig：在 EngineConfig 之上，再加调度器自己的几项设置。

服务模式的收发地址也在这里：几个进程约定同一个 ipc_dir，地址由名字拼出来，谁也不用
把地址告诉谁（见 minisgl/utils/mp.py · ipc_addr）。
"""

from __future__ import annotations

from dataclasses import dataclass

from minisgl.engine import EngineConfig
from minisgl.utils.mp import ipc_addr


@dataclass(frozen=True)
class SchedulerConfig(EngineConfig):
    max_extend_tokens: int = 8192  # 一步 prefill 最多算多少个 token（预算）
    cache_type: str = "radix"  # 前缀缓存的种类："radix"（默认）或 "naive"（不缓存）
    offline_mode: bool = False  # True：离线用法（LLM.generate），没有前端进程
    # 分块 prefill 的两块之间插一步 decode（默认和上游一样：prefill 优先，块接着块）
    decode_between_chunks: bool = False
    # 服务模式：放 IPC 套接字文件的目录，启动器为每个服务新建一个；离线模式用不到
    ipc_dir: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.max_extend_tokens, int) and self.max_extend_tokens >= 1):
            raise ValueError(f"max_extend_tokens 必须是 ≥ 1 的整数，收到 {self.max_extend_tokens!r}")
        if not isinstance(self.decode_between_chunks, bool):
            raise ValueError(f"decode_between_chunks 必须是 True 或 False，收到 {self.decode_between_chunks!r}")

    # ---------------------------------------------------------------- 服务模式的地址

    @property
    def zmq_backend_addr(self) -> str:
        """tokenizer 进程 → 调度器 rank 0（rank 0 bind 一个 PULL）。"""
        return self._addr("backend")

    @property
    def zmq_detokenizer_addr(self) -> str:
        """调度器 rank 0 → tokenizer 进程（tokenizer 进程 bind 它的 PULL，名字是 "tokenizer"）。"""
        return self._addr("tokenizer")

    @property
    def zmq_scheduler_broadcast_addr(self) -> str:
        """调度器 rank 0 → 其他 rank（rank 0 bind PUB，其他 rank connect SUB）。

        单机时是 ipc_dir 里的套接字文件；多机时别的机器看不到这个文件，改走 TCP：
        rank 0 所在机器的地址，端口是 dist_init_addr 的端口 + 1。
        """
        if self.nnodes == 1:
            return self._addr("broadcast")
        assert self.dist_init_addr is not None  # EngineConfig 已经检查过
        host, port = self.dist_init_addr.rsplit(":", 1)
        return f"tcp://{host}:{int(port) + 1}"

    def _addr(self, name: str) -> str:
        if self.ipc_dir is None:
            raise ValueError("服务模式需要 ipc_dir：SchedulerConfig(..., ipc_dir=new_ipc_dir())")
        return ipc_addr(self.ipc_dir, name)
