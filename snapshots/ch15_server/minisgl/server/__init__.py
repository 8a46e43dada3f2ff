"""服务：命令行参数（args）、启动器（launch）、前端管理器（frontend）、OpenAI 兼容的 HTTP 接口（api_server、protocol、errors）、终端对话（shell）。"""

from .launch import launch_server

__all__ = ["launch_server"]
