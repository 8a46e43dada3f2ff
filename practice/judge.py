#!/usr/bin/env python3
"""手写 mini-sglang · 练习评测器（rustlings 风格）。只用标准库。

    python practice/judge.py                列出全部练习，并告诉你下一题做哪个
    python practice/judge.py list           列出全部练习和完成情况
    python practice/judge.py start N        把第 N 题的 starter 复制到工作区，开始做
    python practice/judge.py test N         评测你在工作区里写的第 N 题
    python practice/judge.py hint N         看第 N 题的下一条提示（每次多给一条）
    python practice/judge.py show N         看第 N 题的题目（不含提示）
    python practice/judge.py solution N     看参考答案（至少评测过一次之后）
    python practice/judge.py watch          保存文件就自动评测（Ctrl-C 退出）
    python practice/judge.py progress       看学习进度

工作区 practice/workspace/ 和进度文件 practice/.progress.json 都被 git 忽略，是你自己的。
设置环境变量 JUDGE_HOME=某个目录，可以把它们放到别处（测试就是这么做的）。

评测时，你的代码在一个单独的子进程里跑，有时间限制（默认 60 秒，--timeout 可改）。
死循环、崩溃、语法错误都会变成一句中文结论，而不是评测器自己的报错。
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRACTICE = Path(__file__).resolve().parent
ROOT = PRACTICE.parent
MANIFEST = PRACTICE / "exercises.toml"
CHAPTERS_MANIFEST = ROOT / "chapters" / "manifest.toml"

EXERCISE_FILES = ("problem.md", "starter.py", "solution.py", "test.py")
DIFFICULTIES = ("简单", "中等", "困难")
DEFAULT_TIMEOUT = 60.0
WATCH_INTERVAL = 1.0

ENCOURAGEMENTS = (
    "漂亮！",
    "稳稳拿下。",
    "干得好，继续保持！",
    "又往完整的推理引擎走近了一步。",
    "一次比一次熟练了。",
    "随机输入全对上了，舒服。",
)


class UserError(Exception):
    """输入有问题（编号不存在、参数不对、清单和目录对不上……）：打印一行中文，退出码 2。"""


# ---------------------------------------------------------------------------
# 终端输出：是终端就上色，输出到管道或文件就不上色（设置 NO_COLOR 也不上色）
# ---------------------------------------------------------------------------


class Color:
    enabled = False

    @classmethod
    def setup(cls) -> None:
        cls.enabled = sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _paint(code: str) -> Callable[[str], str]:
    def paint(text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if Color.enabled and text else text

    return paint


bold, dim = _paint("1"), _paint("2")
red, green, yellow, cyan = _paint("31"), _paint("32"), _paint("33"), _paint("36")

_ANSI = re.compile(r"\033\[[0-9;]*m")


def text_width(text: str) -> int:
    """终端里占几列：中文和 emoji 占两列，颜色控制符不占。"""
    width = 0
    for ch in _ANSI.sub("", text):
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - text_width(text))


def indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def progress_bar(done: int, total: int, width: int = 20) -> str:
    filled = round(width * done / total) if total else 0
    return green("█" * filled) + dim("░" * (width - filled))


def show_path(path: Path) -> str:
    """路径尽量写成相对当前目录的样子，好复制。"""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # Windows 上不同盘符
        return str(path)
    return str(path) if rel.startswith("..") else rel


def judge_command() -> str:
    return f"python {show_path(Path(__file__).resolve())}"


# ---------------------------------------------------------------------------
# 读清单（TOML）。Python 3.11+ 有 tomllib；3.10 上用一个只认清单里那几种写法的小解析器。
# ---------------------------------------------------------------------------


def _mini_toml(text: str) -> dict[str, Any]:
    """够读 exercises.toml 的 TOML 子集：注释、[[表数组]]、key = 字符串/整数/布尔。

    认不出的值原样保留成字符串，不报错（读章节清单时只关心编号和标题）。
    """
    data: dict[str, Any] = {}
    current = data
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[[") and line.endswith("]]"):
            current = {}
            data.setdefault(line[2:-2].strip(), []).append(current)
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"第 {lineno} 行看不懂：{raw}")
        key, value = key.strip(), value.strip()
        if value.startswith('"'):
            end = value.find('"', 1)
            while end != -1 and value[end - 1] == "\\":
                end = value.find('"', end + 1)
            current[key] = json.loads(value[: end + 1]) if end != -1 else value
        elif value.startswith("'"):
            current[key] = value[1 : value.find("'", 1)]
        elif value == "[]":
            current[key] = []
        elif value in ("true", "false"):
            current[key] = value == "true"
        elif re.fullmatch(r"[+-]?\d+", value.split("#")[0].strip()):
            current[key] = int(value.split("#")[0].strip())
        else:
            current[key] = value
    return data


def read_toml(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        return _mini_toml(text)
    return tomllib.loads(text)


# ---------------------------------------------------------------------------
# 练习清单
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Exercise:
    number: int
    slug: str
    title: str
    chapter: int
    difficulty: str
    stdlib_only: bool
    folder: Path

    @property
    def code(self) -> str:
        """三位编号：001。"""
        return f"{self.number:03d}"

    @property
    def name(self) -> str:
        """文件夹名：003_req_lengths。"""
        return f"{self.code}_{self.slug}"

    @property
    def label(self) -> str:
        return f"{self.code} · {self.title}"

    def file(self, name: str) -> Path:
        return self.folder / name


def load_exercises(manifest: Path = MANIFEST) -> list[Exercise]:
    """读清单，并检查它和磁盘上的文件夹对得上；对不上就是一行中文的 UserError。"""
    where = show_path(manifest)
    if not manifest.is_file():
        raise UserError(f"找不到练习清单 {where}")
    try:
        data = read_toml(manifest)
    except Exception as e:  # noqa: BLE001 - tomllib 的各种解析错误
        raise UserError(f"练习清单 {where} 的格式有误：{e}") from None

    exercises: list[Exercise] = []
    for index, entry in enumerate(data.get("exercise", []), 1):
        if not isinstance(entry, dict):
            raise UserError(f"练习清单 {where} 的第 {index} 项不是一张表")
        wanted = {
            "number": int,
            "slug": str,
            "title": str,
            "chapter": int,
            "difficulty": str,
            "stdlib_only": bool,
        }
        for key, kind in wanted.items():
            value = entry.get(key)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise UserError(
                    f"练习清单 {where} 的第 {index} 项缺少字段 {key}（应该是 {kind.__name__}）"
                )
        if entry["number"] != index:
            raise UserError(
                f"练习清单 {where} 的第 {index} 项编号是 {entry['number']}：编号要从 1 开始连续排"
            )
        if not re.fullmatch(r"[a-z0-9_]+", entry["slug"]):
            raise UserError(
                f"练习 {index:03d} 的 slug「{entry['slug']}」只能用小写字母、数字和下划线"
            )
        if entry["difficulty"] not in DIFFICULTIES:
            raise UserError(
                f"练习 {index:03d} 的难度「{entry['difficulty']}」不对，只能是 {' / '.join(DIFFICULTIES)}"
            )
        ex = Exercise(
            number=index,
            slug=entry["slug"],
            title=entry["title"],
            chapter=entry["chapter"],
            difficulty=entry["difficulty"],
            stdlib_only=entry["stdlib_only"],
            folder=manifest.parent / f"{index:03d}_{entry['slug']}",
        )
        if not ex.folder.is_dir():
            raise UserError(
                f"练习 {ex.code} 的文件夹 {show_path(ex.folder)} 不存在：清单 {where} 和目录对不上"
            )
        for name in EXERCISE_FILES:
            if not ex.file(name).is_file():
                raise UserError(f"练习 {ex.code} 缺少文件 {show_path(ex.file(name))}")
        exercises.append(ex)
    return exercises


def find_exercise(exercises: list[Exercise], arg: str) -> Exercise:
    """把命令行上的“N”变成一道题：接受 3、003、req_lengths、003_req_lengths。"""
    text = arg.strip()
    if re.fullmatch(r"\d+", text):
        number = int(text)
        if 1 <= number <= len(exercises):
            return exercises[number - 1]
        if not exercises:
            raise UserError("清单里还没有练习")
        raise UserError(
            f"没有第 {number} 题：现有的练习编号是 1–{len(exercises)}（{judge_command()} list 看全部）"
        )
    for ex in exercises:
        if text in (ex.slug, ex.name):
            return ex
    raise UserError(f"「{arg}」不是练习编号：请给一个数字，比如 1（{judge_command()} list 看全部）")


def chapter_titles() -> dict[int, str]:
    """章节编号 → 标题，从 chapters/manifest.toml 读；读不到就空着（只显示“第 N 章”）。"""
    try:
        data = read_toml(CHAPTERS_MANIFEST)
        return {int(c["number"]): str(c["title"]) for c in data.get("chapter", [])}
    except Exception:  # noqa: BLE001 - 章节标题只是锦上添花
        return {}


def chapter_label(chapter: int, titles: dict[int, str]) -> str:
    title = titles.get(chapter)
    return f"第 {chapter} 章 {title}" if title else f"第 {chapter} 章"


# ---------------------------------------------------------------------------
# 工作区和进度文件
# ---------------------------------------------------------------------------


def home_dir() -> Path:
    override = os.environ.get("JUDGE_HOME")
    return Path(override).expanduser().resolve() if override else PRACTICE


def workspace_dir() -> Path:
    return home_dir() / "workspace"


def workspace_file(ex: Exercise) -> Path:
    return workspace_dir() / f"{ex.name}.py"


class Progress:
    """进度文件 .progress.json：每道题（按 slug 记，编号以后可能因为插题而变）评测了几次、
    最近一次的结论、看了几条提示。每次改动都整体重写，先写临时文件再改名，不会写坏一半。"""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"version": 1, "exercises": {}}
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(data, dict) or not isinstance(data.get("exercises"), dict):
                    raise ValueError("结构不对")
                self.data = data
            except (ValueError, OSError):
                broken = path.with_name(path.name + ".broken")
                os.replace(path, broken)
                print(
                    yellow(
                        f"进度文件 {show_path(path)} 读不出来，已改名为 {broken.name}，从头记录。"
                    ),
                    file=sys.stderr,
                )

    @classmethod
    def load(cls) -> Progress:
        return cls(home_dir() / ".progress.json")

    def entry(self, ex: Exercise) -> dict[str, Any]:
        return self.data["exercises"].setdefault(ex.slug, {})

    def peek(self, ex: Exercise) -> dict[str, Any]:
        return self.data["exercises"].get(ex.slug, {})

    def passed(self, ex: Exercise) -> bool:
        return self.peek(ex).get("status") == "passed"

    def attempts(self, ex: Exercise) -> int:
        return int(self.peek(ex).get("attempts", 0))

    def status_icon(self, ex: Exercise) -> str:
        status = self.peek(ex).get("status")
        if status == "passed":
            return "✅"
        if status == "failed":
            return "❌"
        return dim("·")

    def record_test(self, ex: Exercise, verdict: str, mtime_ns: int | None) -> None:
        entry = self.entry(ex)
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        entry["status"] = "passed" if verdict == "passed" else "failed"
        entry["last_verdict"] = verdict
        entry["tested_mtime_ns"] = mtime_ns
        entry["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".progress-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.data, f, ensure_ascii=False, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def next_exercise(self, exercises: list[Exercise]) -> Exercise | None:
        return next((ex for ex in exercises if not self.passed(ex)), None)

    def done_count(self, exercises: list[Exercise]) -> int:
        return sum(self.passed(ex) for ex in exercises)


# ---------------------------------------------------------------------------
# 题目与提示：problem.md 里以“## 提示”开头的小节，一节是一条提示
# ---------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def split_problem(text: str) -> tuple[str, list[tuple[str, str]]]:
    """把 problem.md 拆成（去掉提示的题目，[(提示标题, 提示正文), ...]）。

    代码块（``` 围起来的）里以 # 开头的行不算标题。
    """
    statement: list[str] = []
    hints: list[tuple[str, list[str]]] = []
    hint_level = 0  # >0 表示正在读一条提示，值是它的标题级别
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            level, title = len(heading.group(1)), heading.group(2)
            if title.startswith("提示"):
                hints.append((title, []))
                hint_level = level
                continue
            if hint_level and level <= hint_level:
                hint_level = 0
        if hint_level:
            hints[-1][1].append(line)
        else:
            statement.append(line)
    return (
        "\n".join(statement).strip() + "\n",
        [(title, "\n".join(body).strip()) for title, body in hints],
    )


# ---------------------------------------------------------------------------
# 评测：在子进程里跑 test.py，带时间限制
# ---------------------------------------------------------------------------


@dataclass
class Verdict:
    kind: str  # passed / failed / timeout / syntax / crash / not_started
    message: str = ""
    detail: str = ""
    file: str = ""
    line: int | None = None
    offset: int | None = None
    text: str = ""
    output: str = ""  # 你的代码打印的东西（最后几行）
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.kind == "passed"


def _tail(path: Path, max_lines: int = 12, max_bytes: int = 64_000) -> str:
    """读一个可能很大的输出文件的最后几行。"""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").rstrip().splitlines()
    if len(lines) > max_lines:
        lines = ["…"] + lines[-max_lines:]
    return "\n".join(lines)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """连同它可能启动的子进程一起结束掉。"""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass
    proc.wait()


def run_test(ex: Exercise, target: Path, timeout: float = DEFAULT_TIMEOUT) -> Verdict:
    """用 ex 的 test.py 评测 target 文件，返回结论。judge 自己不会因为学习者的代码而崩溃。"""
    if not target.is_file():
        return Verdict("not_started")
    with tempfile.TemporaryDirectory(prefix="judge-") as tmp_name:
        tmp = Path(tmp_name)
        result_path = tmp / "result.json"
        env = dict(os.environ)
        env.update(
            JUDGE_TARGET=str(target.resolve()),
            JUDGE_RESULT=str(result_path),
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONIOENCODING="utf-8",
            PYTHONUNBUFFERED="1",
        )
        start = time.monotonic()
        with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, str(ex.file("test.py"))],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=tmp,  # 学习者的代码要是写文件，就写在临时目录里
                env=env,
                start_new_session=True,  # 自成一个进程组：超时时一起结束；Ctrl-C 也不会直接打到它
            )
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return Verdict(
                    "timeout",
                    seconds=time.monotonic() - start,
                    output=_tail(tmp / "stdout", 6),
                    extra={"limit": timeout},
                )
            except BaseException:  # Ctrl-C：先收拾掉子进程再往外抛
                _kill(proc)
                raise
        seconds = time.monotonic() - start
        output = _tail(tmp / "stdout")

        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None
        if result is None:
            # test.py 没写出结论：它自己没能启动（比如缺 torch），或者进程被杀 / os._exit 了
            stderr = _tail(tmp / "stderr", 15)
            missing = re.search(r"No module named '([\w.]+)'", stderr)
            if missing:
                module = missing.group(1)
                message = f"评测需要的模块 {module} 没有安装（pip install {module.split('.')[0]}）"
            elif returncode < 0:
                message = f"进程被信号 {-returncode} 结束了"
            else:
                message = (
                    f"评测没有给出结论（退出码 {returncode}）。你的代码是不是调用了 os._exit？"
                )
            return Verdict("crash", message=message, detail=stderr, output=output, seconds=seconds)

        return Verdict(
            kind=result.get("verdict", "crash"),
            message=result.get("message", ""),
            detail=result.get("detail", ""),
            file=result.get("file", ""),
            line=result.get("line"),
            offset=result.get("offset"),
            text=result.get("text", ""),
            output=output,
            seconds=seconds,
        )


def test_and_record(ex: Exercise, progress: Progress, timeout: float) -> Verdict:
    target = workspace_file(ex)
    if not target.is_file():
        return Verdict("not_started")
    mtime_ns = target.stat().st_mtime_ns
    verdict = run_test(ex, target, timeout)
    progress.record_test(ex, verdict.kind, mtime_ns)
    return verdict


def print_verdict(
    ex: Exercise, verdict: Verdict, progress: Progress, exercises: list[Exercise]
) -> None:
    cmd = judge_command()
    n = ex.number
    if verdict.kind == "passed":
        print(green(bold(f"✅ 通过！{ex.label}")) + dim(f"  （{verdict.seconds:.1f} 秒）"))
        print(f"   {random.choice(ENCOURAGEMENTS)}")
        done, total = progress.done_count(exercises), len(exercises)
        print(f"   已完成 {done}/{total} {progress_bar(done, total)}")
        nxt = progress.next_exercise(exercises)
        if nxt is None:
            print(green("   🎉 全部练习都通过了！"))
        else:
            print(f"   下一题：{nxt.label} → {cyan(f'{cmd} start {nxt.number}')}")
        return

    if verdict.kind == "not_started":
        print(yellow(f"· 还没开始：{ex.label}"))
        print(f"   先运行 {cyan(f'{cmd} start {n}')}，它会把题目的 starter 复制到工作区。")
        return

    if verdict.kind == "failed":
        print(red(bold(f"❌ 未通过：{ex.label}")))
        print(indent(verdict.message))
    elif verdict.kind == "timeout":
        limit = verdict.extra.get("limit", DEFAULT_TIMEOUT)
        print(yellow(bold(f"⏰ 超时：{ex.label} 在 {limit:g} 秒内没有跑完，已被停止。")))
        print("   是不是有死循环？（比如 while 的条件永远成立，或者循环变量忘了更新）")
        print(f"   如果确实需要更久，可以加 --timeout {int(limit) * 2}。")
    elif verdict.kind == "syntax":
        where = show_path(Path(verdict.file)) if verdict.file else show_path(workspace_file(ex))
        print(red(bold(f"📝 语法错误：{where} 第 {verdict.line} 行")))
        if verdict.text:
            print(f"   {verdict.line:>4} | {verdict.text}")
            if verdict.offset:
                caret_col = text_width(verdict.text[: max(0, verdict.offset - 1)])
                print(f"        | {' ' * caret_col}{red('^')}")
        print(f"   Python 说：{verdict.message}")
    else:  # crash
        print(red(bold(f"💥 运行时崩溃：{ex.label}")))
        print(indent(verdict.message))
        if verdict.detail:
            print(dim(indent(verdict.detail, "   │ ")))

    if verdict.output and verdict.kind != "syntax":
        print(dim("   你的代码打印了（最后几行）："))
        print(dim(indent(verdict.output, "   │ ")))
    print(
        f"   改好保存后再运行 {cyan(f'{cmd} test {n}')}；卡住了就看提示：{cyan(f'{cmd} hint {n}')}"
    )


# ---------------------------------------------------------------------------
# 命令
# ---------------------------------------------------------------------------


@dataclass
class Args:
    command: str
    exercise: str | None = None
    force: bool = False
    once: bool = False
    timeout: float = DEFAULT_TIMEOUT


def cmd_list(args: Args, exercises: list[Exercise]) -> int:
    progress = Progress.load()
    titles = chapter_titles()
    rows = [("状态", "编号", "标题", "章节", "难度")]
    for ex in exercises:
        title = ex.title + ("" if ex.stdlib_only else dim("（需 torch）"))
        rows.append(
            (
                progress.status_icon(ex),
                ex.code,
                title,
                chapter_label(ex.chapter, titles),
                ex.difficulty,
            )
        )
    widths = [max(text_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(bold("手写 mini-sglang · 练习"))
    print()
    for i, row in enumerate(rows):
        line = "  ".join(pad(cell, widths[j]) for j, cell in enumerate(row)).rstrip()
        print(" " + (bold(line) if i == 0 else line))
    print()
    done, total = progress.done_count(exercises), len(exercises)
    print(f"已完成 {done}/{total} {progress_bar(done, total)}")
    return 0


def print_next(exercises: list[Exercise]) -> None:
    progress = Progress.load()
    nxt = progress.next_exercise(exercises)
    cmd = judge_command()
    if not exercises:
        print("清单里还没有练习。")
    elif nxt is None:
        print(green("🎉 全部练习都通过了！"))
    elif workspace_file(nxt).is_file():
        print(f"接着做：{bold(nxt.label)}")
        print(
            f"   在 {show_path(workspace_file(nxt))} 里写，然后 {cyan(f'{cmd} test {nxt.number}')}"
        )
    else:
        print(f"下一题：{bold(nxt.label)} → {cyan(f'{cmd} start {nxt.number}')}")


def cmd_default(args: Args, exercises: list[Exercise]) -> int:
    cmd_list(args, exercises)
    print()
    print_next(exercises)
    print(dim(f"（全部命令：{judge_command()} help）"))
    return 0


def cmd_start(args: Args, exercises: list[Exercise]) -> int:
    ex = find_exercise(exercises, args.exercise or "")
    target = workspace_file(ex)
    cmd = judge_command()
    if target.exists() and not args.force:
        print(yellow(f"工作区里已经有 {show_path(target)} 了，不会覆盖你的代码。"))
        print(
            f"   接着写它就好；要从头来过，加 --force：{cmd} start {ex.number} --force（旧文件会备份成 .bak）"
        )
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.copyfile(target, target.with_name(target.name + ".bak"))
    shutil.copyfile(ex.file("starter.py"), target)

    titles = chapter_titles()
    print(
        green(bold(f"开始：{ex.label}"))
        + dim(f"（{chapter_label(ex.chapter, titles)} · {ex.difficulty}）")
    )
    print(f"   题目：{show_path(ex.file('problem.md'))}   （或 {cmd} show {ex.number}）")
    print(f"   在这里写代码：{bold(show_path(target))}")
    print(
        f"   写好了评测：{cyan(f'{cmd} test {ex.number}')}   或者开着 {cyan(f'{cmd} watch')}，保存就评测"
    )
    print(f"   卡住了：{cyan(f'{cmd} hint {ex.number}')}")
    return 0


def cmd_test(args: Args, exercises: list[Exercise]) -> int:
    ex = find_exercise(exercises, args.exercise or "")
    progress = Progress.load()
    if workspace_file(ex).is_file():
        print(dim(f"评测 {ex.label} …"))
    verdict = test_and_record(ex, progress, args.timeout)
    print_verdict(ex, verdict, progress, exercises)
    return 0 if verdict.passed else 1


def cmd_show(args: Args, exercises: list[Exercise]) -> int:
    ex = find_exercise(exercises, args.exercise or "")
    statement, hints = split_problem(ex.file("problem.md").read_text(encoding="utf-8"))
    print(statement.rstrip())
    if hints:
        print()
        print(
            dim(
                f"（这道题有 {len(hints)} 条提示：{judge_command()} hint {ex.number}，每次多看一条）"
            )
        )
    return 0


def cmd_hint(args: Args, exercises: list[Exercise]) -> int:
    ex = find_exercise(exercises, args.exercise or "")
    _, hints = split_problem(ex.file("problem.md").read_text(encoding="utf-8"))
    cmd = judge_command()
    if not hints:
        print(f"{ex.label} 没有提示。题目在 {show_path(ex.file('problem.md'))}。")
        return 0
    progress = Progress.load()
    entry = progress.entry(ex)
    shown = int(entry.get("hints", 0))
    if shown >= len(hints):
        print(yellow(f"{ex.label} 的提示已经全部给出了（{len(hints)}/{len(hints)}）："))
        for title, body in hints:
            print()
            print(bold(f"💡 {title}"))
            print(indent(body))
        print()
        print(f"还是卡住？可以看参考答案：{cyan(f'{cmd} solution {ex.number}')}")
        return 0
    title, body = hints[shown]
    entry["hints"] = shown + 1
    progress.save()
    print(bold(f"💡 {title}") + dim(f"  （{shown + 1}/{len(hints)} · {ex.label}）"))
    print(indent(body))
    left = len(hints) - shown - 1
    if left:
        print(dim(f"\n（还有 {left} 条提示：再运行一次 {cmd} hint {ex.number}）"))
    return 0


def cmd_solution(args: Args, exercises: list[Exercise]) -> int:
    ex = find_exercise(exercises, args.exercise or "")
    progress = Progress.load()
    cmd = judge_command()
    if progress.attempts(ex) == 0 and not args.force:
        print(yellow(f"先自己试一次吧：{cmd} start {ex.number}，写完 {cmd} test {ex.number}。"))
        print(
            f"   评测过一次之后就能看答案；实在想现在看，加 --force：{cmd} solution {ex.number} --force"
        )
        return 1
    print(bold(f"参考答案 · {ex.label}") + dim(f"   {show_path(ex.file('solution.py'))}"))
    print()
    print(ex.file("solution.py").read_text(encoding="utf-8").rstrip())
    print()
    print(dim("对照着看看：和你的写法哪里不一样？哪种更好读？"))
    return 0


def cmd_progress(args: Args, exercises: list[Exercise]) -> int:
    progress = Progress.load()
    titles = chapter_titles()
    done, total = progress.done_count(exercises), len(exercises)
    print(bold("学习进度"))
    percent = round(100 * done / total) if total else 0
    print(f"已完成 {done}/{total} {progress_bar(done, total)} {percent}%")
    chapters: dict[int, list[Exercise]] = {}
    for ex in exercises:
        chapters.setdefault(ex.chapter, []).append(ex)
    for chapter, items in chapters.items():
        ch_done = sum(progress.passed(ex) for ex in items)
        print()
        bar = progress_bar(ch_done, len(items), 10)
        print(f"{bold(chapter_label(chapter, titles))}  {ch_done}/{len(items)} {bar}")
        width = max(text_width(ex.label) for ex in items)
        for ex in items:
            entry = progress.peek(ex)
            notes = []
            if entry.get("attempts"):
                notes.append(f"评测 {entry['attempts']} 次")
            elif workspace_file(ex).is_file():
                notes.append("已开始，还没评测")
            if entry.get("hints"):
                notes.append(f"看了 {entry['hints']} 条提示")
            icon = pad(progress.status_icon(ex), 2)
            print(f"   {icon} {pad(ex.label, width)}  {dim(' · '.join(notes))}".rstrip())
    print()
    print_next(exercises)
    return 0


def cmd_watch(args: Args, exercises: list[Exercise]) -> int:
    """每秒看一眼工作区，哪个文件改了就评测哪个。--once：只处理一轮已有的改动就退出。"""
    any_failed = False

    def mtimes() -> dict[Exercise, int]:
        found = {}
        for ex in exercises:
            try:
                found[ex] = workspace_file(ex).stat().st_mtime_ns
            except OSError:
                pass
        return found

    def judge(ex: Exercise) -> None:
        nonlocal any_failed
        print()
        print(dim(f"[{time.strftime('%H:%M:%S')}] 评测 {ex.label} …"))
        progress = Progress.load()  # 每次重读：别的终端里可能刚用过 hint
        verdict = test_and_record(ex, progress, args.timeout)
        print_verdict(ex, verdict, progress, exercises)
        any_failed = any_failed or not verdict.passed

    # 从后台启动的进程会继承“忽略 SIGINT”：这里明确装上默认处理，保证 Ctrl-C 总能退出
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        seen = mtimes()
        if not args.once:
            print(
                bold(
                    f"👀 正在监视 {show_path(workspace_dir())}/ —— 保存文件就自动评测。按 Ctrl-C 退出。"
                )
            )
        if not seen:
            print(f"工作区还是空的。先挑一道题：{cyan(f'{judge_command()} start 1')}")
        # 先评测上次评测之后又改过的文件（包括 watch 没开着时改的）
        progress = Progress.load()
        pending = [ex for ex, m in seen.items() if progress.peek(ex).get("tested_mtime_ns") != m]
        for ex in pending:
            judge(ex)
        if args.once:
            if not pending:
                print("没有新的改动需要评测。")
            return 1 if any_failed else 0
        if not pending:
            print_next(exercises)
        while True:
            time.sleep(WATCH_INTERVAL)
            now = mtimes()
            changed = [ex for ex, m in now.items() if seen.get(ex) != m]
            if changed:
                time.sleep(0.2)  # 编辑器可能分几次写完，稍等一下
                now = mtimes()
                for ex in changed:
                    if ex in now:
                        judge(ex)
            seen = now
    except KeyboardInterrupt:
        print()
        print("再见，下次接着练！")
        return 0


HELP = __doc__.split("\n\n", 2)[1]


def cmd_help(args: Args, exercises: list[Exercise]) -> int:
    print(bold("手写 mini-sglang · 练习评测器"))
    print()
    print(HELP.replace("python practice/judge.py", judge_command()))
    print()
    print(
        "选项：start / solution 加 --force；test / watch 加 --timeout 秒数；watch 加 --once 只评测一轮。"
    )
    return 0


# ---------------------------------------------------------------------------
# 命令行解析：自己写，为了让每一条报错都是一行中文
# ---------------------------------------------------------------------------

COMMANDS: dict[str, tuple[Callable[[Args, list[Exercise]], int], bool, set[str]]] = {
    # 命令: (函数, 是否需要练习编号, 允许的选项)
    "list": (cmd_list, False, set()),
    "start": (cmd_start, True, {"--force"}),
    "test": (cmd_test, True, {"--timeout"}),
    "hint": (cmd_hint, True, set()),
    "show": (cmd_show, True, set()),
    "solution": (cmd_solution, True, {"--force"}),
    "watch": (cmd_watch, False, {"--once", "--timeout"}),
    "progress": (cmd_progress, False, set()),
    "help": (cmd_help, False, set()),
}


def parse_args(argv: list[str]) -> Args:
    if not argv:
        return Args("")
    command, rest = argv[0], argv[1:]
    if command in ("-h", "--help"):
        command = "help"
    if command not in COMMANDS:
        raise UserError(f"不认识的命令「{command}」。可用的命令：{' '.join(COMMANDS)}")
    _, needs_exercise, allowed = COMMANDS[command]
    args = Args(command)
    positionals: list[str] = []
    i = 0
    while i < len(rest):
        item = rest[i]
        if item in ("-h", "--help"):
            return Args("help")
        if item.startswith("--"):
            name, eq, value = item.partition("=")
            if name not in allowed:
                raise UserError(f"{command} 不认识选项「{name}」")
            if name == "--timeout":
                if not eq:
                    i += 1
                    value = rest[i] if i < len(rest) else ""
                try:
                    args.timeout = float(value)
                except ValueError:
                    args.timeout = -1.0
                if not 0 < args.timeout < float("inf"):
                    raise UserError(
                        f"--timeout 需要一个正数（秒），比如 --timeout 120，而不是「{value}」"
                    )
            elif eq:
                raise UserError(f"选项 {name} 不带值")
            else:
                setattr(args, name[2:], True)
        else:
            positionals.append(item)
        i += 1
    cmd = judge_command()
    if needs_exercise:
        if not positionals:
            raise UserError(f"{command} 需要一个练习编号，比如：{cmd} {command} 1")
        args.exercise = positionals.pop(0)
    if positionals:
        raise UserError(f"多余的参数「{' '.join(positionals)}」（{cmd} help 看用法）")
    return args


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    Color.setup()
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if args.command == "help":  # 清单坏了也能看帮助
            return cmd_help(args, [])
        exercises = load_exercises()
        if not args.command:
            return cmd_default(args, exercises)
        return COMMANDS[args.command][0](args, exercises)
    except UserError as e:
        print(red(f"✋ {e}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\n已中断。", file=sys.stderr)
        return 130
    except OSError as e:
        print(red(f"✋ 文件操作失败：{e}"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
