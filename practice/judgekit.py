"""练习评测的小工具箱：每道题的 test.py 都用它。只依赖标准库。

一道题的 test.py 长这样::

    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 judgekit
    from judgekit import check, check_equal, check_type, main

    def run(mod):                     # mod = 被评测的文件（学习者的、starter 或 solution）
        check_type(mod.f(3), int, "f(3) 的返回值")
        check_equal(mod.f(3), 9, "f(3)")

    if __name__ == "__main__":
        main(run)

被评测的文件由命令行第一个参数或环境变量 JUDGE_TARGET 指定，所以同一个 test.py 能判
starter、solution 和学习者工作区里的副本::

    JUDGE_TARGET=practice/003_req_lengths/solution.py python practice/003_req_lengths/test.py

评测器（judge.py 用的 minibook.judging.run_test，网页上是 minibook/browser_judge.py）还会设置
JUDGE_RESULT=某个文件路径：评测结果以 JSON 写到那里，评测器据此给出 通过 / 未通过 / 语法错误 /
运行时崩溃 的结论（超时由评测器自己计时：本地结束子进程，网页上结束 worker）。本地评测还设置
JUDGE_STARTED=某个文件路径：main() 开始评测时创建它，时间限制从这一刻算起，test.py 自己的
import（比如 torch）不算在里面。单独运行时，结论
直接打印出来，退出码 0 表示通过。

给出题人的约定：
- 检查失败一律用这里的 check_* 函数（或 test.py 里的 assert），消息写中文，说清楚
  “输入是什么、应该是什么、你给的是什么”；
- 先查类型和形状，再查数值，这样学习者看到的第一条错误就是最好懂的那条；
- 数值要和 test.py 里**独立写的参考实现**在随机输入（固定种子）上比较，
  不能只查“能跑”，否则删掉代码也能过。
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import random
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # 不在学习者的工作区里留下 __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))
import isolation  # noqa: E402 - 和 judgekit 在同一个目录

_HERE = Path(__file__).resolve()
_ISOLATION_SOURCE = Path(isolation.__file__).read_text(encoding="utf-8")

# 结论的种类，judge.py 也用同样的名字
PASSED, FAILED, SYNTAX, CRASH, TIMEOUT = "passed", "failed", "syntax", "crash", "timeout"


class CheckFailed(AssertionError):
    """一条检查没通过。消息就是给学习者看的中文说明。"""

    sticky = True  # 在 test.py 的回调里抛出、被学习者的代码吞掉了，也照样算没通过（见 isolation.Peer）


# ---------------------------------------------------------------------------
# 检查函数
# ---------------------------------------------------------------------------


def short(value: Any, limit: int = 120) -> str:
    """把一个值写成不太长的一行，用在错误消息里。"""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 5] + " …" + text[-4:]
    return text


def _type_name(types: type | tuple[type, ...]) -> str:
    if isinstance(types, tuple):
        return " 或 ".join(t.__name__ for t in types)
    return types.__name__


def check(condition: Any, message: str) -> None:
    """条件不成立就判“未通过”，message 是给学习者看的说明。"""
    if not condition:
        raise CheckFailed(message)


def check_type(value: Any, types: type | tuple[type, ...], what: str) -> None:
    """value 必须是 types 的实例。bool 不算 int（True 不是一个长度）。"""
    expects_int = types is int or (isinstance(types, tuple) and int in types)
    ok = isinstance(value, types) and not (expects_int and isinstance(value, bool))
    if not ok:
        raise CheckFailed(
            f"{what} 应该是 {_type_name(types)}，你给的是 {type(value).__name__}：{short(value)}"
        )


def check_int_list(value: Any, what: str) -> None:
    """value 必须是一个 list，元素都是 int。"""
    check_type(value, list, what)
    for i, item in enumerate(value):
        if not isinstance(item, int) or isinstance(item, bool):
            raise CheckFailed(
                f"{what} 的第 {i} 个元素应该是 int，你给的是 {type(item).__name__}：{short(item)}"
            )


def check_equal(actual: Any, expected: Any, what: str, context: str = "") -> None:
    """actual == expected；不相等时指出第一个不同的位置（对 list/tuple）。"""
    if actual == expected:
        return
    lines = [f"{what} 不对。"]
    if context:
        lines.append(f"  输入：{context}")
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            lines.append(f"  长度应该是 {len(expected)}，你的是 {len(actual)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a != e:
                lines.append(f"  第一个不同在下标 {i}：应该是 {short(e)}，你的是 {short(a)}")
                break
    lines.append(f"  应该是：{short(expected)}")
    lines.append(f"  你的是：{short(actual)}")
    raise CheckFailed("\n".join(lines))


def mistake_hint(hits: list[str]) -> str:
    """学习者的结果和哪几种常见错误的结果一样（hits：每种错误的说明）。几种错误碰巧给出同一个结果时
    都列出来：只挑一种说，可能说的恰好不是学习者犯的那种。"""
    if not hits:
        return ""
    if len(hits) == 1:
        return f"\n  看起来：{hits[0]}"
    return "\n  看起来是下面几种之一（这组输入分不出是哪一种）：" + "".join(f"\n    - {h}" for h in hits)


def check_raises(
    exc_type: type[BaseException], fn: Callable[..., Any], *args: Any, what: str, **kwargs: Any
) -> BaseException:
    """调用 fn(*args, **kwargs) 必须抛出 exc_type。

    抛出别的异常也算“未通过”（比如用 assert 代替了 ValueError），但 NotImplementedError
    原样放行，好让结论说成“这里还没写”。
    """
    try:
        result = fn(*args, **kwargs)
    except exc_type as e:
        return e
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - 换成中文说明
        where = getattr(e, "remote_where", "")
        where = f"（{where}）" if where else ""
        name = getattr(e, "remote_type", type(e).__name__)
        raise CheckFailed(
            f"{what} 应该抛出 {exc_type.__name__}，你的代码抛出的是 {name}: {e}{where}"
        ) from None
    raise CheckFailed(f"{what} 应该抛出 {exc_type.__name__}，你的代码却正常返回了 {_argument(result)}")


def probe_bad_arguments(
    fn: Callable[..., Any], good: dict[str, Any], bad: dict[str, Any], rng: Any, *,
    name: str, tries: int = 6, exc_type: type[BaseException] = ValueError,
) -> None:
    """坏参数的检查：每次从 bad 里随机挑一个参数、随机挑一个坏值（其余参数都是好的 good），
    调用 fn(**参数) 必须抛 exc_type。参数的位置和坏值每次评测都不一样：只认一个固定的值、
    只查一个位置的代码过不去。

    bad[参数名] 是坏值的列表，或者一个函数 rng -> 坏值（每次现造一个：比如列表里随机一个位置上的
    元素是坏的，见 with_bad_item）。good 里的列表、字典每次都复制一份再传，被改了也不影响下一次。"""
    import copy

    keys = list(bad)
    for _ in range(tries):
        key = rng.choice(keys)
        value = bad[key](rng) if callable(bad[key]) else rng.choice(bad[key])
        fresh = {k: copy.deepcopy(v) if type(v) in (list, dict, set, tuple) else v for k, v in good.items()}
        kwargs = {**fresh, key: value}
        shown = ", ".join(f"{k}={_argument(v)}" for k, v in kwargs.items())
        check_raises(exc_type, fn, what=f"{name}({shown})（{key} 是坏的）", **kwargs)


def _argument(value: Any) -> str:
    """坏参数消息里的一个参数：张量写形状和 dtype（内容截断之后就看不出形状了），别的写成短的一行。"""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return f"张量(形状 {tuple(value.shape)}, {str(value.dtype).removeprefix('torch.')})"
    return short(value, 60)


_next_place: int | None = None  # with_bad_item 下一次把坏元素放在哪：0 开头、1 中间、2 末尾


def with_bad_item(rng: Any, items: list[Any], spoil: Callable[[Any, Any], Any]) -> list[Any]:
    """items 的一份拷贝，其中一个位置上的元素换成 spoil(原来的元素, rng)。

    位置轮流取开头、中间（随机一个）、末尾，从哪个开始是随机的：一次评测里连着造三次，三种位置都会
    出现，只查第一个 / 最后一个元素的代码总会被抓到，不靠运气。"""
    global _next_place
    if _next_place is None:
        _next_place = rng.randrange(3)
    place, _next_place = _next_place, (_next_place + 1) % 3
    out = list(items)
    n = len(out)
    if place == 0 or n == 1:
        i = 0
    elif place == 2:
        i = n - 1
    else:
        i = rng.randrange(1, n - 1) if n > 2 else rng.randrange(n)
    out[i] = spoil(out[i], rng)
    return out


def bad_int(rng: Any, below: int) -> int:
    """一个小于 below 的随机整数：就在边界上（below - 1）或者远一些。"""
    return rng.choice([below - 1, below - 1, below - rng.randint(2, 5), below - rng.randint(6, 1000)])


def check_tensor(
    value: Any, what: str, *, shape: tuple[int, ...] | None = None, dtype: Any = None
) -> None:
    """value 必须是 torch.Tensor，且（如果给了）形状、dtype 对得上。先查这些再查数值。"""
    import torch  # 只有用到张量的题才需要 torch

    check_type(value, torch.Tensor, what)
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise CheckFailed(f"{what} 的形状应该是 {tuple(shape)}，你的是 {tuple(value.shape)}")
    if dtype is not None and value.dtype != dtype:
        raise CheckFailed(f"{what} 的 dtype 应该是 {dtype}，你的是 {value.dtype}")


def check_close(
    actual: Any, expected: Any, what: str, *, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    """两个张量逐元素接近：|a - e| <= atol + rtol * |e|。先查形状和 dtype。"""
    import torch

    check_tensor(actual, what, shape=tuple(expected.shape), dtype=expected.dtype)
    if expected.numel() == 0:
        return
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    bad = ~torch.isclose(a, e, atol=atol, rtol=rtol, equal_nan=False)
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        diff = float((a - e).abs().max())
        raise CheckFailed(
            f"{what} 的数值不对：{int(bad.sum())}/{e.numel()} 个元素超出容差"
            f"（atol={atol}, rtol={rtol}），最大误差 {diff:.3g}；"
            f"比如下标 {idx}：应该是 {float(e[idx]):.6g}，你的是 {float(a[idx]):.6g}"
        )


def torch_calls(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """调用 fn(*args, **kwargs)，返回 (结果, 它做的 torch 运算的名字列表)。

    fn 是学习者的函数时，记录在它的子进程里做（见 isolation._traced）。"""
    if isinstance(fn, isolation.Proxy):
        return fn._peer.request("trace", fn, args, kwargs)
    return isolation._traced(fn, args, kwargs)


def in_child(mod: Any, value: Any) -> Any:
    """把 value 复制一份放进学习者的进程，返回它的句柄：对句柄的修改（h[0] = 1）改的是那一份。
    用来检查“学习者的代码有没有和调用者共用同一个列表”——跨进程传的参数本来都是拷贝。"""
    peer = _peer_of(mod)
    if peer is None:
        return value
    return peer.request("own", mod._remote if isinstance(mod, isolation.RemoteClass) else mod, (value,))


def _peer_of(obj: Any) -> Any:
    if isinstance(obj, isolation.Proxy):
        return obj._peer
    if isinstance(obj, isolation.RemoteClass):
        return obj._remote._peer
    return None


# 只用标准库的题：学习者的进程里导入第三方的数值库就判“未通过”（numpy.percentile 之类正是题目要写的东西）。
# 用法：main(run, prelude=ONLY_STDLIB)
ONLY_STDLIB = """
import sys


class CheckFailed(AssertionError):
    pass


class _OnlyStdlib:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "scipy", "pandas", "torch"):
            raise CheckFailed(f"这道题只用 Python 标准库：不许导入 {name}")
        return None


sys.meta_path.insert(0, _OnlyStdlib())
"""


_REPR_STAGES: dict[int, Any] = {}


def kept_repr(mod: Any, handle: Any) -> str:
    """repr(handle)，在学习者的进程里算好、按值取回来。用来查参数有没有被改动：== 分不出 1 和 1.0、
    [1, 2] 和 (1, 2)，repr 分得出。驱动只做 repr（记录），比较在评测这边做。"""
    peer = _peer_of(mod)
    if peer is None:
        return repr(handle)
    if id(peer) not in _REPR_STAGES:
        _REPR_STAGES[id(peer)] = stage(mod, "snapshot = repr\n")
    return _REPR_STAGES[id(peer)].snapshot(handle)


def call_kept(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """调用学习者的函数，结果留在学习者的进程里，返回它的句柄（同 in_child 的用处）。"""
    if not isinstance(fn, isolation.Proxy):
        return fn(*args, **kwargs)
    return fn._peer.request("keep", fn, args, kwargs)


def item_kept(handle: Any, key: Any) -> Any:
    """handle[key]，结果留在学习者的进程里（同 call_kept）。"""
    if not isinstance(handle, isolation.Proxy):
        return handle[key]
    return call_kept(handle._do("getattr", "__getitem__"), key)


def learner_modules(mod: Any) -> list[str]:
    """学习者的进程里导入过的模块名（sys.modules）。"""
    if not isinstance(mod, isolation.Proxy):
        return sorted(sys.modules)
    return mod._peer.request("modules", mod)


def stage(mod: Any, source: str) -> Any:
    """在学习者的进程里执行 source（test.py 里写的一小段驱动：搭场景、记录看到的事，不含参考实现和结论），
    返回那个命名空间的句柄。用在评测这边没法直接驱动的题上：学习者的工作线程要调用的任务、asyncio 的
    事件循环，都得和学习者的对象在同一个进程里；驱动把观察到的东西按值交回来，判断仍在评测进程里做。
    驱动和学习者的代码同在一个进程里，学习者改得了它：它只许记录，不许下结论。"""
    peer = _peer_of(mod)
    if peer is None:
        return isolation._stage(source)
    return peer.request("stage", mod._remote if isinstance(mod, isolation.RemoteClass) else mod, (source,))


def more_processes(mod: Any, n: int) -> list[Any]:
    """同一份被评测的文件再在 n 个新的子进程里各导入一次，返回它们的句柄（每个都是单独的进程，
    就像多个 rank）。评测进程的几个线程各自驱动一个：一个子进程里同时只有一个调用在进行，协议不用管并发。"""
    if BRIDGE is not None:
        raise RuntimeError("浏览器里只有一个学习者的解释器：要几个学习者进程的题请用本地的 judge.py 评测")
    if IN_PROCESS or not isinstance(mod, isolation.Proxy):
        return [mod] * n
    first = next(c for c in _CHILDREN if c.module is mod)
    return [Child(first.path, first.source, first.prelude).module for _ in range(n)]


def require(mod: Any, name: str) -> Any:
    """被评测的文件里必须有 name（函数或类）。"""
    if not hasattr(mod, name):
        raise CheckFailed(f"你的文件里找不到 {name}。别改 starter 里的名字哦。")
    return getattr(mod, name)


# ---------------------------------------------------------------------------
# 加载被评测的文件
# ---------------------------------------------------------------------------


def _load_in_process(path: Path) -> Any:
    """在评测进程里直接导入：只在浏览器里用（Pyodide 起不了子进程，见 main）。"""
    import importlib.util

    name = "learner_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"无法把 {path} 当作 Python 模块导入")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


IN_PROCESS = ""  # 非空：学习者的代码在评测进程里运行（原因；只在没有 judge_bridge 的浏览器里）
BRIDGE: Any = None  # 浏览器里：通向学习者那个 Pyodide 解释器的 JS 模块（见 docs/assets/practice-worker.js）
PRELUDE = ""  # 在学习者的进程里、导入学习者的代码之前先执行的源码（见 main 的 prelude）


def load_target(path: str | os.PathLike[str]) -> Any:
    """在子进程里导入被评测的文件，返回它的句柄（对它的一切操作都跨进程，见 isolation.py）。

    子进程的当前目录是一个临时目录，sys.path 上没有 practice/，环境变量里没有 JUDGE_*（随机种子、
    结论文件都不给它），CPU 时间有上限（JUDGE_TIME_LIMIT 秒）。
    """
    path = Path(path).resolve()
    if IN_PROCESS:
        return _load_in_process(path)
    source = path.read_text(encoding="utf-8")
    return Child(path, source, PRELUDE).module


_CHILDREN: list["Child"] = []
FENCE_PROBLEMS: set[str] = set()  # 没能搭好的围栏（isolation.confine 说的原因）：结论里带上，评测器提醒一句


def _cpu_limit() -> float:
    try:
        return max(0.5, float(os.environ.get("JUDGE_TIME_LIMIT", "")))
    except ValueError:
        return 0.0


class LearnerTimeout(Exception):
    """学习者的代码用完了 CPU 时间（或者墙钟时间的上限）。"""


class LearnerGone(Exception):
    """学习者代码所在的子进程没了。"""


# 评测器从预热模板 fork 好的学习者子进程："读端,写端,pid,退出状态的读端"（见 practice/warm.py）。
# 只给第一个 Child 用；more_processes 要的其余几个照常新起
_WARM_CHILD = os.environ.pop("JUDGE_WARM_CHILD", "")


class _WarmChild:
    """预热模板 fork 的子进程不是这个进程的子进程：退出状态由模板从一条管道写过来。
    接口和 subprocess.Popen 里用到的那几个一样（poll / wait / kill / returncode）。"""

    def __init__(self, pid: int, status_fd: int) -> None:
        self.pid, self.status_fd, self.returncode = pid, status_fd, None

    def _read(self) -> None:
        data = b""
        with contextlib.suppress(OSError):
            data = os.read(self.status_fd, 64)
        try:
            self.returncode = int(data.strip())
        except ValueError:  # 模板没了，不知道退出状态
            self.returncode = 1

    def poll(self) -> int | None:
        import select

        if self.returncode is None and select.select([self.status_fd], [], [], 0)[0]:
            self._read()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import select
        import subprocess

        if self.returncode is None:
            if not select.select([self.status_fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("learner", timeout or 0)
            self._read()
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        import signal

        if self.returncode is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


class _BridgeLearner:
    """浏览器里学习者的那个解释器，接口和 subprocess.Popen 里用到的几个一样。它“退出”就是它那边抛出了
    JS 的异常（比如 os._exit）；结束它由网页来做（整个 worker 用过就扔）。"""

    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and BRIDGE.dead():
            self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.poll() or 0

    def kill(self) -> None:
        pass


class Child:
    """学习者的代码所在的子进程（浏览器里是另一个解释器），和评测进程之间用 isolation.Peer 说话。"""

    def __init__(self, path: Path, source: str, prelude: str = "") -> None:
        self.path, self.source, self.prelude = path, source, prelude
        self.module: Any = None
        self.work = ""  # 子进程的当前目录（浏览器里没有）
        if BRIDGE is not None:
            from pyodide.ffi import create_proxy

            self.proc: Any = _BridgeLearner()
            _CHILDREN.append(self)
            self.peer = isolation.BridgePeer(BRIDGE, isolation.PARENT, trusts_other=False)
            BRIDGE.serve(create_proxy(self.peer.step))  # 学习者那边等我们回答回调时，JS 调用它
            self._load(cwd="", cpu=0)  # 时间限制由网页结束整个 worker 来管
            return
        self._start_process()

    def _start_process(self) -> None:
        import resource
        import subprocess
        import tempfile
        import time

        global _WARM_CHILD
        limit = _cpu_limit()
        self.work = tempfile.mkdtemp(prefix="learner-")
        if not _WARM_CHILD:
            to_child_r, to_child_w = os.pipe()
            to_parent_r, to_parent_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # 一个线程：题目里的张量都很小，多线程只会在忙的机器上空转、白白吃掉 CPU 时间的限制
        # （023 的参考答案在负载重的两核机器上因此用掉 6–8 秒 CPU，单线程不到 1 秒）
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[name] = "1"

        # 协议本身（收发、编解码每一次调用）也在子进程里花 CPU：测试调用得多的题能占到好几秒，
        # 所以 CPU 时间的上限是 2 × 限制 + 2 秒；死循环照样很快被停下
        seconds = max(1, math.ceil(2 * limit + 2)) if limit else 0

        def limit_cpu() -> None:  # 在子进程里、exec 之前：到了 CPU 时间上限先收到 SIGXCPU，再过一秒 SIGKILL
            if seconds:
                resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
        if _WARM_CHILD:
            # 评测器从预热模板（practice/warm.py）fork 好了一个子进程：torch 已经导入，别的什么都没有
            rfd, wfd, pid, status_fd = (int(x) for x in _WARM_CHILD.split(","))
            _WARM_CHILD = ""
            self.proc = _WarmChild(pid, status_fd)
            _CHILDREN.append(self)
            self.peer = isolation.Peer(rfd, wfd, isolation.PARENT, trusts_other=False)
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-u", "-B", "-c", _ISOLATION_SOURCE, str(to_child_r), str(to_parent_w)],
                stdin=subprocess.DEVNULL, cwd=self.work, env=env, pass_fds=(to_child_r, to_parent_w),
                preexec_fn=limit_cpu if hasattr(resource, "RLIMIT_CPU") else None,
            )
            _CHILDREN.append(self)  # 导入时就没了 / 超时，也要能查到它是怎么没的
            os.close(to_child_r)
            os.close(to_parent_w)
            self.peer = isolation.Peer(to_parent_r, to_child_w, isolation.PARENT, trusts_other=False)
        # 墙钟时间只是兜底（学习者的代码睡着、等一个永远不来的东西时 CPU 时间不涨）：负载再重也够用
        if limit:
            self.peer.deadline = time.monotonic() + 6 * limit + 10
        self._load(self.work, seconds)

    def _load(self, cwd: str, cpu: int) -> None:
        self.peer.send({"op": "load", "path": str(self.path), "source": self.source, "prelude": self.prelude,
                        "name": "learner_" + re.sub(r"\W", "_", self.path.stem), "cwd": cwd, "cpu": cpu})
        # 子进程先回一句围栏（只读的文件系统、没有特权，见 isolation.confine）搭好了没有，再运行学习者的代码
        fence = self.peer.receive()
        if fence.get("op") != "fence":
            raise isolation.ProtocolError(f"子进程没有先报告围栏：{short(fence)}")
        if fence.get("reason"):
            FENCE_PROBLEMS.add(str(fence["reason"]))
        self.module = self.peer.request_reply()

    def why_gone(self) -> BaseException:
        """子进程没了：是用完了 CPU 时间（超时），还是自己退出 / 崩了。"""
        import signal
        import subprocess

        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code in (-getattr(signal, "SIGXCPU", 24), -signal.SIGKILL) and _cpu_limit():
            return LearnerTimeout()
        if code is not None and code < 0:
            return LearnerGone(f"你的代码所在的进程被信号 {-code} 结束了")
        return LearnerGone(f"你的代码所在的进程提前退出了（退出码 {code}）。是不是调用了 os._exit 或 sys.exit？")

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()


def _close_children() -> None:
    import shutil

    for child in _CHILDREN:
        if child.proc.poll() is None:
            child.kill()
        if child.work:
            shutil.rmtree(child.work, ignore_errors=True)
    _CHILDREN.clear()


# ---------------------------------------------------------------------------
# 把异常变成结论
# ---------------------------------------------------------------------------


def _same_file(a: str | None, b: Path) -> bool:
    if not a:
        return False
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def _traceback_tail(exc: BaseException, max_lines: int = 16) -> str:
    """只保留和学习者相关的栈帧（去掉 judgekit 和 importlib 的内部帧），取最后几行。"""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not _same_file(f.filename, _HERE) and not f.filename.startswith("<frozen")
    ]
    lines = ["Traceback (most recent call last):"]
    lines += "".join(traceback.format_list(frames)).rstrip("\n").splitlines()
    lines += "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n").splitlines()
    if len(lines) > max_lines:
        lines = ["…（前面省略）"] + lines[-max_lines:]
    return "\n".join(lines)


def _innermost_frame(exc: BaseException) -> traceback.FrameSummary | None:
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1] if frames else None


def _not_implemented_message(exc: BaseException, target: Path) -> str:
    """NotImplementedError：找出是学习者文件里哪个函数还没写（子进程把位置一起交回来了）。"""
    where = getattr(exc, "remote_where", "") or "某个函数 "
    extra = f"：{exc}" if str(exc) else ""
    return f"{where}还没写完，它还在 raise NotImplementedError{extra}"


def _remote_detail(exc: BaseException) -> str:
    return getattr(exc, "remote_traceback", "") or _traceback_tail(exc)


def classify(exc: BaseException, target: Path, test_file: Path) -> dict[str, Any]:
    """把 run(mod) 里冒出来的异常翻译成结论。"""
    if isinstance(exc, CheckFailed):
        return {"verdict": FAILED, "message": str(exc)}
    if getattr(exc, "remote_type", "") == "CheckFailed":  # prelude 在学习者的进程里发现的问题
        return {"verdict": FAILED, "message": str(exc)}
    if isinstance(exc, LearnerTimeout):
        return {"verdict": TIMEOUT, "message": "你的代码用完了这道题的时间限制"}
    if isinstance(exc, LearnerGone):
        return {"verdict": CRASH, "message": str(exc)}
    if isinstance(exc, isolation.ProtocolError):
        return {"verdict": CRASH, "message": f"你的代码所在的进程发来了看不懂的消息（{exc}）"}
    if isinstance(exc, NotImplementedError):
        return {"verdict": FAILED, "message": _not_implemented_message(exc, target)}
    if isinstance(exc, AssertionError) and not hasattr(exc, "remote_type"):
        frame = _innermost_frame(exc)
        if frame is not None and _same_file(frame.filename, test_file):
            # test.py 里直接写的 assert：消息为空时就显示那一行代码
            message = str(exc) or f"检查没通过：{(frame.line or '').strip()}"
            return {"verdict": FAILED, "message": message}
    if isinstance(exc, SystemExit):
        return {
            "verdict": CRASH,
            "message": f"你的代码调用了 sys.exit({exc.code!r})，评测没法继续",
            "detail": _remote_detail(exc),
        }
    name = getattr(exc, "remote_type", type(exc).__name__)
    return {
        "verdict": CRASH,
        "message": f"{name}: {exc}",
        "detail": _remote_detail(exc),
    }


# ---------------------------------------------------------------------------
# 静态检查：评测前先看一眼源码。真正挡住作弊的是进程边界，这里只是把最常见的几种
# “去读参考答案 / 去碰评测”的写法先拦下来，并说清楚为什么
# ---------------------------------------------------------------------------

_FORBIDDEN_WORDS = ("solution", "test.py", "judgekit", "isolation", "judge_")
_FORBIDDEN_CALLS = {"open": "打开文件", "exec": "执行拼出来的代码", "eval": "执行拼出来的代码",
                    "compile": "编译拼出来的代码", "__import__": "按名字导入模块", "breakpoint": "进调试器"}
_FORBIDDEN_ATTRS = {"read_text": "读文件", "read_bytes": "读文件", "write_text": "写文件", "write_bytes": "写文件",
                    "getppid": "找评测进程", "kill": "结束别的进程", "_getframe": "翻调用栈",
                    "system": "运行外部命令", "popen": "运行外部命令", "execv": "运行外部命令", "fork": "开子进程"}
_FORBIDDEN_MODULES = {"runpy": "运行别的文件", "importlib": "按名字导入模块", "subprocess": "运行外部命令",
                      "ctypes": "直接改解释器的内存", "inspect": "翻调用栈", "gc": "翻出别的对象",
                      "builtins": "改内置函数", "signal": "改信号处理", "resource": "改资源上限",
                      "multiprocessing": "开子进程", "pickle": "反序列化", "shutil": "搬文件", "glob": "找文件"}


def screen(source: str, filename: str) -> str | None:
    """源码里有评测不接受的写法就返回一句中文说明（第几行、什么、为什么），否则 None。"""
    import ast

    tree = ast.parse(source, filename)

    def reject(node: ast.AST, what: str, why: str) -> str:
        return (f"评测拒绝了这份代码：第 {getattr(node, 'lineno', '?')} 行{what}（{why}）。\n"
                "练习只看你写的函数本身：不读文件、不碰参考答案和评测程序，也不在运行时拼代码。")

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            low = node.value.lower()
            for word in _FORBIDDEN_WORDS:
                if word in low:
                    return reject(node, f"的字符串提到了「{word}」", "参考答案和评测程序不是你的代码能碰的")
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if any(word.replace(".", "_") in name.lower() for word in _FORBIDDEN_WORDS):
                return reject(node, f"用到了名字「{name}」", "参考答案和评测程序不是你的代码能碰的")
            if isinstance(node, ast.Attribute) and name in _FORBIDDEN_ATTRS:
                return reject(node, f"用到了 .{name}", _FORBIDDEN_ATTRS[name])
            if isinstance(node, ast.Name) and name in _FORBIDDEN_CALLS:
                return reject(node, f"用到了 {name}", _FORBIDDEN_CALLS[name])
            if isinstance(node, ast.Attribute) and name == "open" and isinstance(node.value, ast.Name) \
                    and node.value.id in ("os", "io", "pathlib", "codecs", "tokenize"):
                return reject(node, f"用到了 {node.value.id}.open", "打开文件")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for full in names:
                top = full.split(".")[0]
                if top in _FORBIDDEN_MODULES:
                    return reject(node, f"导入了 {full}", _FORBIDDEN_MODULES[top])
                if any(word.replace(".", "_") in full.lower() for word in _FORBIDDEN_WORDS):
                    return reject(node, f"导入了 {full}", "参考答案和评测程序不是你的代码能碰的")
    return None


def evaluate(run: Callable[[Any], None], target: Path, test_file: Path) -> dict[str, Any]:
    """在子进程里导入 target，在这个进程里运行 run(mod)，返回结论字典（不抛异常）。"""
    try:
        source = target.read_text(encoding="utf-8")
        compile(source, str(target), "exec")  # 只编译不运行：语法错误在这里就能指出来
    except SyntaxError as e:
        return {
            "verdict": SYNTAX,
            "message": e.msg,
            "file": str(target),
            "line": e.lineno,
            "offset": e.offset,
            "text": (e.text or "").rstrip("\n"),
        }
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return {"verdict": CRASH, "message": f"读不了你的文件：{e}"}
    refused = screen(source, str(target))
    if refused:
        return {"verdict": FAILED, "message": refused}
    try:
        try:
            module = load_target(target)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - 导入时的任何错误都是结论
            e = _child_failure(e)
            result = classify(e, target, test_file)
            if result["verdict"] == CRASH:
                result["message"] = "导入你的文件时出错：" + result["message"]
            return result
        try:
            run(module)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001
            return classify(_child_failure(e), target, test_file)
        return {"verdict": PASSED, "message": "全部检查通过"}
    finally:
        _close_children()


def _child_failure(e: BaseException) -> BaseException:
    """子进程断开 / 等太久：换成“超时”或“进程没了”。"""
    if isinstance(e, (isolation.ChannelClosed, BrokenPipeError)) and _CHILDREN:
        gone = [c for c in _CHILDREN if c.proc.poll() is not None]  # 有几个子进程时（more_processes）：没了的那个
        return (gone or _CHILDREN[-1:])[0].why_gone()
    if isinstance(e, isolation.WallTimeout):
        for child in _CHILDREN:
            child.kill()
        return LearnerTimeout()
    return e


# ---------------------------------------------------------------------------
# 随机种子：每次评测由评测器抽一个（子进程看不到），没通过时告诉学习者怎么复现
# ---------------------------------------------------------------------------

_SEED: int | None = None


def seed() -> int:
    """这次评测的随机种子：环境变量 JUDGE_SEED（judge.py 每次抽一个新的，复现时自己设），否则现抽一个。"""
    global _SEED
    if _SEED is None:
        text = os.environ.get("JUDGE_SEED", "")
        _SEED = int(text) if text.strip().isdigit() else random.SystemRandom().randrange(1, 10**9)
    return _SEED


def rng(salt: int = 0) -> random.Random:
    """由这次评测的种子派生的随机数发生器；salt 区分同一道题里的几路随机。"""
    return random.Random(seed() * 1_000_003 + salt)


# ---------------------------------------------------------------------------
# test.py 的入口
# ---------------------------------------------------------------------------


def _print_human(result: dict[str, Any]) -> None:
    verdict = result["verdict"]
    if verdict == PASSED:
        print("通过：" + result["message"])
    elif verdict == FAILED:
        print("未通过：\n" + result["message"])
    elif verdict == SYNTAX:
        print(f"语法错误：{result['file']} 第 {result['line']} 行：{result['message']}")
        if result.get("text"):
            print("    " + result["text"])
    elif verdict == TIMEOUT:
        print("超时：" + result["message"])
    else:
        print("运行时崩溃：" + result["message"])
        if result.get("detail"):
            print(result["detail"])


def _not_dumpable() -> None:
    """Linux：别的同用户进程（比如学习者代码所在的子进程）读不了这个进程的内存和环境变量。"""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


def main(run: Callable[[Any], None], prelude: str = "") -> None:
    """test.py 的 `if __name__ == "__main__":` 里调用它。

    prelude：在学习者的进程里、导入学习者的代码之前执行的一段源码（抛出名叫 CheckFailed 的异常
    就算“未通过”）。它和学习者的代码在同一个进程里，只适合“别用现成的某某”这类提示性的检查。
    要多个线程或 asyncio 同时驱动学习者对象的题：每个线程一个子进程（more_processes），
    或者把场景交给学习者进程里的驱动（stage），评测进程只看它交回来的观察。"""
    global IN_PROCESS, PRELUDE, BRIDGE
    PRELUDE = prelude
    if sys.platform == "emscripten":
        # 浏览器里（Pyodide）起不了子进程：学习者的代码在同一个 worker 里的另一个解释器里，
        # 经网页装进来的 judge_bridge 和这边说话
        try:
            import judge_bridge  # type: ignore[import-not-found]
        except ImportError:  # 没有第二个解释器（旧的 worker）：只好同在一个解释器里，结论里提醒一句
            IN_PROCESS = "浏览器里没有第二个解释器"
            FENCE_PROBLEMS.add("浏览器里没有第二个解释器：你的代码和评测在同一个解释器里")
        else:
            BRIDGE = judge_bridge
    test_file = Path(sys.modules["__main__"].__file__ or sys.argv[0]).resolve()
    target_arg = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("JUDGE_TARGET")
    if not target_arg:
        print("用法：python test.py 要评测的文件.py   （或设置环境变量 JUDGE_TARGET）")
        sys.exit(2)
    target = Path(target_arg).resolve()
    if not target.is_file():
        print(f"找不到要评测的文件：{target}")
        sys.exit(2)

    result_path = os.environ.get("JUDGE_RESULT")
    nonce = ""
    if os.environ.get("JUDGE_NONCE") == "stdin":
        # 评测器从标准输入交给我们一个一次性的口令，结论里带上它：别的进程伪造的结论文件没有口令
        nonce = sys.stdin.readline().strip()
    _not_dumpable()
    seed()
    started = os.environ.get("JUDGE_STARTED")
    if started:
        # 告诉评测器：test.py 的准备（import torch 之类）做完了，从这里开始算学习者代码的时间
        Path(started).touch()
    result = evaluate(run, target, test_file)
    if result["verdict"] == FAILED and not result["message"].startswith("评测拒绝了这份代码"):
        result["message"] += f"\n  （这次的随机种子：JUDGE_SEED={seed()}，设置这个环境变量再评测就能复现同样的输入）"
    result["seed"] = seed()
    if FENCE_PROBLEMS:
        result["fence"] = "；".join(sorted(FENCE_PROBLEMS))

    if result_path:
        # 由 judge.py 调用：结论写成 JSON，先写临时文件再改名，避免写一半
        result["nonce"] = nonce
        tmp = result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, ensure_ascii=False)
        os.replace(tmp, result_path)
    else:
        with contextlib.suppress(Exception):
            sys.stdout.reconfigure(errors="replace")  # type: ignore[attr-defined]
        _print_human(result)
    sys.exit(0 if result["verdict"] == PASSED else 1)
