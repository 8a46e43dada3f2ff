"""评测的预热模板：一个已经 import 了 torch、别的什么都没有的进程，每次评测从它 fork 出两个新进程。

评测要 torch 的题时，每次都新起两个解释器、各 import 一遍 torch（test.py 一个，学习者的子进程一个），
在两核的机器上一次就是好几秒。这个模板由评测器（minibook.judging）在第一次需要时启动，之后每次评测：

- fork 出 test.py 的进程 T：它从评测器交来的管道里读到环境变量（随机种子、结论文件、口令都在 T 里，
  模板自己从来不看）、切到评测器给的目录、接上评测器给的标准输入输出，然后运行 test.py；
- fork 出学习者的子进程 L：它和以前 `python -I -c isolation.py` 起的子进程一样——只有 isolation 的协议，
  环境变量里没有 JUDGE_*，等 T 发来学习者的代码。每次评测都是一个新的 L，上一份答案留下的东西带不过来。

模板不持有任何评测的秘密（它只转交文件描述符），所以从它 fork 出来的 L 里也没有；T 和 L 在同一个
进程组里，评测器超时时一起结束。模板替 T 和 L 收尸，把它们的退出状态写回给评测器和 T。
评测器和模板之间是一对 SOCK_SEQPACKET 的 socket；评测器退出了，模板读到 EOF 也就退出。

    python -I warm.py 套接字的文件描述符
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))

# T 里的固定文件描述符号（评测器交来的描述符先 dup2 到这些位置，其余的全部关掉）
T_LIFE, T_ENV, T_L_READ, T_L_WRITE, T_L_STATUS = 3, 4, 5, 6, 7
# L 里的
L_READ, L_WRITE = 3, 4


def _keep_only(fds: dict[int, int]) -> None:
    """把 fds（目标号 → 现在的号）dup2 到位，关掉 3 以上的其余描述符。"""
    staged = {}
    for target, fd in fds.items():  # 先挪到高处，避免互相覆盖
        staged[target] = os.dup(fd)
    for target, fd in staged.items():
        os.dup2(fd, target, inheritable=True)
    os.closerange(max(fds, default=2) + 1, 4096)
    for fd in range(3, max(fds, default=2) + 1):
        if fd not in fds:
            try:
                os.close(fd)
            except OSError:
                pass


def _std(fd: int, mode: str):
    import io

    if mode == "r":
        return io.TextIOWrapper(open(fd, "rb", buffering=0, closefd=False), encoding="utf-8")
    return io.TextIOWrapper(open(fd, "wb", buffering=0, closefd=False), encoding="utf-8",
                            errors="replace", write_through=True)


def _become_learner(stdout: int, stderr: int, to_child_r: int, to_parent_w: int) -> None:
    """L：学习者的子进程。和 judgekit.Child 用 `python -I -c isolation 的源码` 起的那个一样：
    __main__ 是 isolation 的源码（没有 __file__），sys.argv 是 ['-c', …]，只是 torch 已经导入好了。"""
    import types

    devnull = os.open(os.devnull, os.O_RDONLY)
    _keep_only({0: devnull, 1: stdout, 2: stderr, L_READ: to_child_r, L_WRITE: to_parent_w})
    sys.stdin, sys.stdout, sys.stderr = _std(0, "r"), _std(1, "w"), _std(2, "w")
    sys.argv = ["-c", str(L_READ), str(L_WRITE)]
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    # 和 `python -c` 一样执行协议的源码：它末尾的 `if __name__ == "__main__":` 按 sys.argv 进入 child_main
    exec(compile(ISOLATION_SOURCE, "<string>", "exec"), main.__dict__)  # noqa: S102 - 评测自己的协议
    os._exit(0)


def _become_test(request: dict, fds: dict[int, int]) -> None:
    """T：test.py 的进程。环境变量、参数从评测器直接写进来的管道里读（模板没读过它）。"""
    import runpy

    _keep_only(fds)
    sys.stdin, sys.stdout, sys.stderr = _std(0, "r"), _std(1, "w"), _std(2, "w")
    with open(T_ENV, "rb", closefd=True) as f:
        spec = json.loads(f.read().decode("utf-8"))
    os.environ.clear()
    os.environ.update(spec["env"])
    os.environ["JUDGE_WARM_CHILD"] = f"{T_L_READ},{T_L_WRITE},{request['learner']},{T_L_STATUS}"
    os.chdir(spec["cwd"])
    script = spec["argv"][0]
    sys.argv = list(spec["argv"])
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - 和解释器一样：打印 traceback，退出码 1
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


def _status(wait_status: int) -> int:
    """和 subprocess 的 returncode 一样：正常退出是退出码，被信号结束是负的信号号。"""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def serve(sock: socket.socket) -> None:
    import select

    watching: dict[int, tuple[int, bytes]] = {}  # pid → (写退出状态的描述符, 标签)
    wake_r, wake_w = os.pipe()  # 子进程一退出，信号就往这里写一个字节，select 马上醒
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [], 1.0)
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        while True:  # 收尸：把退出状态写给等着它的人
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            fd, tag = watching.pop(pid, (None, b""))
            if fd is not None:
                try:
                    os.write(fd, tag + str(_status(wait_status)).encode() + b"\n")
                except OSError:
                    pass
                os.close(fd)
        if sock not in ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            return
        if not data:
            return  # 评测器退出了
        request = json.loads(data.decode("utf-8"))
        # 评测器交来的：stdin（口令）、stdout、stderr、环境的管道、T 的退出状态要写去的管道
        stdin, stdout, stderr, env_r, status_w = fds[:5]
        for fd in fds[5:]:
            os.close(fd)
        to_child_r, to_child_w = os.pipe()  # T → L
        to_parent_r, to_parent_w = os.pipe()  # L → T
        l_status_r, l_status_w = os.pipe()  # 模板 → T：L 的退出状态
        l_pid = os.fork()
        if l_pid == 0:  # L 自成一个进程组，T 加进来：评测器超时时 killpg 一次结束两个
            os.setpgid(0, 0)
            _forget_server(sock)
            _become_learner(stdout, stderr, to_child_r, to_parent_w)
        _setpgid(l_pid, l_pid)
        t_pid = os.fork()
        if t_pid == 0:
            _setpgid(0, l_pid)
            _forget_server(sock)
            request["learner"] = l_pid
            _become_test(request, {0: stdin, 1: stdout, 2: stderr, T_LIFE: status_w, T_ENV: env_r,
                                   T_L_READ: to_parent_r, T_L_WRITE: to_child_w, T_L_STATUS: l_status_r})
        _setpgid(t_pid, l_pid)
        for fd in (stdin, stdout, stderr, env_r, to_child_r, to_child_w, to_parent_r, to_parent_w, l_status_r):
            os.close(fd)
        watching[t_pid] = (status_w, b"T ")
        watching[l_pid] = (l_status_w, b"")
        try:
            sock.send(json.dumps({"test": t_pid, "group": l_pid}).encode())
        except OSError:
            return


def _forget_server(sock: socket.socket) -> None:
    """fork 出来的 T / L：不再是模板（信号处理、唤醒管道、和评测器的 socket 都放下）。"""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sock.close()


def _setpgid(pid: int, group: int) -> None:
    try:
        os.setpgid(pid, group)
    except OSError:  # 对方已经自己设好了，或者已经退出了
        pass


ISOLATION_SOURCE = ""


def main() -> None:
    global ISOLATION_SOURCE
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:  # Linux：别的同用户进程（比如从这里 fork 出去的学习者）不能 ptrace 它、读写它的内存来改以后的 fork
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:  # noqa: BLE001
        pass
    with open(os.path.join(HERE, "isolation.py"), encoding="utf-8") as f:
        ISOLATION_SOURCE = f.read()
    try:
        import torch  # noqa: F401 - 这就是预热：每次评测 fork 出来的进程都不用再导入它
    except ImportError:
        pass
    sock.send(b'{"ready": true}')
    serve(sock)


if __name__ == "__main__":
    main()
