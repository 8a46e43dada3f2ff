"""离线接口：不起服务，直接在本进程里用调度器生成。"""

from .llm import LLM

__all__ = ["LLM"]
