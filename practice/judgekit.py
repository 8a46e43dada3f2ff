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
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # 不在学习者的工作区里留下 __pycache__

_HERE = Path(__file__).resolve()

# 结论的种类，judge.py 也用同样的名字
PASSED, FAILED, SYNTAX, CRASH = "passed", "failed", "syntax", "crash"


class CheckFailed(AssertionError):
    """一条检查没通过。消息就是给学习者看的中文说明。"""


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
        frames = traceback.extract_tb(e.__traceback__)
        where = f"（{Path(frames[-1].filename).name} 第 {frames[-1].lineno} 行）" if frames else ""
        raise CheckFailed(
            f"{what} 应该抛出 {exc_type.__name__}，你的代码抛出的是 {type(e).__name__}: {e}{where}"
        ) from None
    raise CheckFailed(f"{what} 应该抛出 {exc_type.__name__}，你的代码却正常返回了 {short(result)}")


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


def require(mod: Any, name: str) -> Any:
    """被评测的文件里必须有 name（函数或类）。"""
    if not hasattr(mod, name):
        raise CheckFailed(f"你的文件里找不到 {name}。别改 starter 里的名字哦。")
    return getattr(mod, name)


# ---------------------------------------------------------------------------
# 加载被评测的文件
# ---------------------------------------------------------------------------


def load_target(path: str | os.PathLike[str]) -> Any:
    """按路径把一个 .py 文件当模块导入（它不需要在 sys.path 上）。"""
    path = Path(path).resolve()
    name = "learner_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"无法把 {path} 当作 Python 模块导入")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclass 等需要在 sys.modules 里找到自己的模块
    spec.loader.exec_module(module)
    return module


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
    """NotImplementedError：找出是学习者文件里哪个函数还没写。"""
    where = "某个函数 "
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if _same_file(code.co_filename, target):
            where = getattr(code, "co_qualname", code.co_name)  # 3.11+ 有 co_qualname
            where = f"{where}（第 {tb.tb_lineno} 行）"
        tb = tb.tb_next
    extra = f"：{exc}" if str(exc) else ""
    return f"{where}还没写完，它还在 raise NotImplementedError{extra}"


def classify(exc: BaseException, target: Path, test_file: Path) -> dict[str, Any]:
    """把 run(mod) 里冒出来的异常翻译成结论。"""
    if isinstance(exc, CheckFailed):
        return {"verdict": FAILED, "message": str(exc)}
    if isinstance(exc, NotImplementedError):
        return {"verdict": FAILED, "message": _not_implemented_message(exc, target)}
    if isinstance(exc, AssertionError):
        frame = _innermost_frame(exc)
        if frame is not None and _same_file(frame.filename, test_file):
            # test.py 里直接写的 assert：消息为空时就显示那一行代码
            message = str(exc) or f"检查没通过：{(frame.line or '').strip()}"
            return {"verdict": FAILED, "message": message}
    if isinstance(exc, SystemExit):
        return {
            "verdict": CRASH,
            "message": f"你的代码调用了 sys.exit({exc.code!r})，评测没法继续",
            "detail": _traceback_tail(exc),
        }
    return {
        "verdict": CRASH,
        "message": f"{type(exc).__name__}: {exc}",
        "detail": _traceback_tail(exc),
    }


def evaluate(run: Callable[[Any], None], target: Path, test_file: Path) -> dict[str, Any]:
    """导入 target 并运行 run(mod)，返回结论字典（不抛异常）。"""
    try:
        module = load_target(target)
    except SyntaxError as e:
        if _same_file(e.filename, target):
            return {
                "verdict": SYNTAX,
                "message": e.msg,
                "file": str(target),
                "line": e.lineno,
                "offset": e.offset,
                "text": (e.text or "").rstrip("\n"),
            }
        result = classify(e, target, test_file)
        result["message"] = "导入你的文件时出错：" + result["message"]
        return result
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - 导入时的任何错误都是结论
        result = classify(e, target, test_file)
        if result["verdict"] == CRASH:
            result["message"] = "导入你的文件时出错：" + result["message"]
        return result

    try:
        run(module)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001
        return classify(e, target, test_file)
    return {"verdict": PASSED, "message": "全部检查通过"}


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
    else:
        print("运行时崩溃：" + result["message"])
        if result.get("detail"):
            print(result["detail"])


def main(run: Callable[[Any], None]) -> None:
    """test.py 的 `if __name__ == "__main__":` 里调用它。"""
    test_file = Path(sys.modules["__main__"].__file__ or sys.argv[0]).resolve()
    target_arg = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("JUDGE_TARGET")
    if not target_arg:
        print("用法：python test.py 要评测的文件.py   （或设置环境变量 JUDGE_TARGET）")
        sys.exit(2)
    target = Path(target_arg).resolve()
    if not target.is_file():
        print(f"找不到要评测的文件：{target}")
        sys.exit(2)

    started = os.environ.get("JUDGE_STARTED")
    if started:
        # 告诉评测器：test.py 的准备（import torch 之类）做完了，从这里开始算学习者代码的时间
        Path(started).touch()
    result = evaluate(run, target, test_file)

    result_path = os.environ.get("JUDGE_RESULT")
    if result_path:
        # 由 judge.py 调用：结论写成 JSON，先写临时文件再改名，避免写一半
        tmp = result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, ensure_ascii=False)
        os.replace(tmp, result_path)
    else:
        with contextlib.suppress(Exception):
            sys.stdout.reconfigure(errors="replace")  # type: ignore[attr-defined]
        _print_human(result)
    sys.exit(0 if result["verdict"] == PASSED else 1)
