"""SchedulerConfig：在 EngineConfig 之上，再加调度器自己的几项设置。"""

from __future__ import annotations

from dataclasses import dataclass

from minisgl.engine import EngineConfig


@dataclass(frozen=True)
class SchedulerConfig(EngineConfig):
    max_extend_tokens: int = 8192  # 一步 prefill 最多算多少个 token（预算）
    cache_type: str = "naive"  # 前缀缓存的种类（"naive"：什么都不存；前缀缓存见第 8 章）
    offline_mode: bool = False  # True：离线用法（LLM.generate），没有前端进程

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.max_extend_tokens, int) and self.max_extend_tokens >= 1):
            raise ValueError(f"max_extend_tokens 必须是 ≥ 1 的整数，收到 {self.max_extend_tokens!r}")
