"""调度器一侧：决定每一步算哪些请求，管页表的行和 KV 页。

- table.py：页表的行与 token 池
- prefill.py / decode.py：排队的请求怎么接纳、在跑的请求怎么组成 decode 批
- scheduler.py：一步的四个阶段；config.py：SchedulerConfig
"""

from .config import SchedulerConfig
from .scheduler import Scheduler
from .utils import PendingReq, ReqOutput

__all__ = ["Scheduler", "SchedulerConfig", "PendingReq", "ReqOutput"]
