"""压测：离线（LLM.generate 跑一批随机请求）和在线（按泊松过程向服务器发请求，量每个 token 的到达时间）。"""

from .client import OnlineResult, RequestTrace, poisson_arrivals, run_online, summarize
from .offline import OfflineResult, run_offline
from .server import launch_server
from .workload import BenchRequest, random_workload

__all__ = ["BenchRequest", "OfflineResult", "OnlineResult", "RequestTrace", "launch_server", "poisson_arrivals", "random_workload",
           "run_offline", "run_online", "summarize"]
