"""`python -m minisgl [参数]`：启动服务器（参数见 `python -m minisgl -h`）。"""

import sys

from minisgl.server import launch_server

if __name__ == "__main__":  # spawn 出来的子进程也会导入本模块，那时不能再启动一遍
    sys.exit(launch_server())
