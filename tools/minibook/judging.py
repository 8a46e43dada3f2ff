"""判题练习的库：读练习清单、拆题面、在子进程里评测、记进度。只用标准库（和同样只用标准库的 minibook.cli）。

用它的有三处，都是普通的 import：

- practice/judge.py（学习者用的命令行）：这里的一切，再加上打印和命令；
- minibook.practice（网站上的练习页）：清单和题面；
- tests/test_judge.py、tests/test_browser_practice.py：出题检查，以及和浏览器里的评测对照。

清单在 practice/exercises.toml，一道题一个文件夹 practice/NNN_slug/（problem.md、starter.py、
solution.py、test.py）。评测结论由 practice/judgekit.py 在子进程里判定，写成 JSON 交回来；
超时由这里计时。
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibook import cli

PRACTICE = Path(__file__).resolve().parents[2] / "practice"
MANIFEST = PRACTICE / "exercises.toml"
CHAPTERS_MANIFEST = PRACTICE.parent / "chapters" / "manifest.toml"

EXERCISE_FILES = ("problem.md", "starter.py", "solution.py", "test.py")
DIFFICULTIES = ("简单", "中等", "困难")
# 每道题的时间限制（秒）。本地算的是学习者代码所在子进程用掉的 CPU 时间（practice/judgekit.py 用
# RLIMIT_CPU 卡住）：两核机器上再有几个进程抢，CPU 时间也不变，不会因为机器忙而冤枉人；墙钟只兜底
# （wall_backstop）。网页上算的是从 Pyodide 加载好算起的墙钟时间。两处都因为学习者那边还要替评测传话，
# 到 2 × 限制 + 2 秒才真正停下（judgekit.Child、docs/assets/practice-runner.js）。test.py 自己 import torch 的时间不算。
# 真要更久的题在清单里写 time_limit = 秒数。
DEFAULT_TIME_LIMIT = 10
# test.py 开始评测之前（解释器启动、import torch）最多等多久；超过了不是学习者的错，结论是“崩溃”
STARTUP_LIMIT = 120


class UserError(cli.UserError):
    """练习相关的读者错误（编号不存在、清单和目录对不上……）：一行中文，命令行工具打印它、退出码 2。"""


def show_path(path: Path) -> str:
    """路径尽量写成相对当前目录的样子，好复制。"""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # Windows 上不同盘符
        return str(path)
    return str(path) if rel.startswith("..") else rel


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
    time_limit: float = DEFAULT_TIME_LIMIT
    local_only_reason: str = ""  # 不是 stdlib_only 的题为什么只能在本地评测；空 = 要用 PyTorch
    chapter_note: str = ""  # 题面“章节”一行括号里的补充
    stdlib_note: str = ""  # 题面“只用标准库”一行“是 / 否”后面的补充

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


_FIELDS = {"number": int, "slug": str, "title": str, "chapter": int, "difficulty": str, "stdlib_only": bool}


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))


def load_exercises(manifest: Path = MANIFEST) -> list[Exercise]:
    """读清单，并检查它和磁盘上的文件夹对得上；对不上就是一行中文的 UserError。"""
    where = show_path(manifest)
    if not manifest.is_file():
        raise UserError(f"找不到练习清单 {where}")
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"练习清单 {where} 的格式有误：{e}") from None

    exercises: list[Exercise] = []
    for index, entry in enumerate(data.get("exercise", []), 1):
        if not isinstance(entry, dict):
            raise UserError(f"练习清单 {where} 的第 {index} 项不是一张表")
        for key, kind in _FIELDS.items():
            if not _is(entry.get(key), kind):
                raise UserError(f"练习清单 {where} 的第 {index} 项缺少字段 {key}（应该是 {kind.__name__}）")
        if entry["number"] != index:
            raise UserError(f"练习清单 {where} 的第 {index} 项编号是 {entry['number']}：编号要从 1 开始连续排")
        if not re.fullmatch(r"[a-z0-9_]+", entry["slug"]):
            raise UserError(f"练习 {index:03d} 的 slug「{entry['slug']}」只能用小写字母、数字和下划线")
        if entry["difficulty"] not in DIFFICULTIES:
            raise UserError(
                f"练习 {index:03d} 的难度「{entry['difficulty']}」不对，只能是 {' / '.join(DIFFICULTIES)}")
        limit = entry.get("time_limit", DEFAULT_TIME_LIMIT)
        if not (_is(limit, int) or _is(limit, float)) or not 0 < limit < float("inf"):
            raise UserError(f"练习 {index:03d} 的 time_limit「{limit}」应该是一个正数（秒）")
        notes = {key: entry.get(key, "") for key in ("chapter_note", "stdlib_note")}
        for key, value in notes.items():
            if not isinstance(value, str):
                raise UserError(f"练习 {index:03d} 的 {key} 应该是一句话")
        reason = entry.get("local_only_reason", "")
        if not isinstance(reason, str) or (reason and entry["stdlib_only"]):
            raise UserError(f"练习 {index:03d} 的 local_only_reason 应该是一句话，而且只给 stdlib_only = false 的题")
        ex = Exercise(
            number=index,
            slug=entry["slug"],
            title=entry["title"],
            chapter=entry["chapter"],
            difficulty=entry["difficulty"],
            stdlib_only=entry["stdlib_only"],
            folder=manifest.parent / f"{index:03d}_{entry['slug']}",
            time_limit=limit,
            local_only_reason=reason,
            **notes,
        )
        if not ex.folder.is_dir():
            raise UserError(f"练习 {ex.code} 的文件夹 {show_path(ex.folder)} 不存在：清单 {where} 和目录对不上")
        for name in EXERCISE_FILES:
            if not ex.file(name).is_file():
                raise UserError(f"练习 {ex.code} 缺少文件 {show_path(ex.file(name))}")
        exercises.append(ex)
    return exercises


def chapter_titles(manifest: Path = CHAPTERS_MANIFEST) -> dict[int, str]:
    """章节编号 → 标题，从 chapters/manifest.toml 读；读不到就空着（只显示“第 N 章”）。"""
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        return {int(c["number"]): str(c["title"]) for c in data.get("chapter", [])}
    except (OSError, ValueError, KeyError, TypeError):  # 章节标题只是锦上添花
        return {}


def chapter_label(chapter: int, titles: dict[int, str]) -> str:
    title = titles.get(chapter)
    return f"第 {chapter} 章 {title}" if title else f"第 {chapter} 章"


# ---------------------------------------------------------------------------
# 题目与提示：problem.md 里以“提示”开头的标题，一节是一条提示
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


def problem_header(ex: Exercise, titles: dict[int, str] | None = None) -> str:
    """题面的开头（标题、章节、难度、只用标准库）：由清单 exercises.toml 生成，problem.md 里不写。"""
    titles = chapter_titles() if titles is None else titles
    chapter = chapter_label(ex.chapter, titles) + (f"（{ex.chapter_note}）" if ex.chapter_note else "")
    stdlib = "是" if ex.stdlib_only or ex.local_only_reason else "否"
    return (f"# 练习 {ex.code} · {ex.title}\n\n- 章节：{chapter}\n- 难度：{ex.difficulty}\n"
            f"- 只用标准库：{stdlib}{ex.stdlib_note}\n\n")


def read_problem(ex: Exercise) -> tuple[str, list[tuple[str, str]]]:
    """（题目，提示）：题目的开头由清单生成，后面是 problem.md。"""
    return split_problem(problem_header(ex) + ex.file("problem.md").read_text(encoding="utf-8"))


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
    limit: float = 0.0  # 这次评测的时间限制（秒）
    seed: int = 0  # 这次评测的随机种子（JUDGE_SEED=它 可以复现）
    fence: str = ""  # 学习者的进程没能关进围栏的原因（practice/isolation.py 的 confine）；关好了是空的

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


def _kill(proc: Any) -> None:
    """连同它可能启动的子进程一起结束掉。"""
    try:
        if hasattr(os, "killpg"):
            os.killpg(getattr(proc, "group", proc.pid), signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    proc.wait()


def _wait_for_start(proc: Any, started: Path,
                    launched: float) -> tuple[int | None, float | None]:
    """等 test.py 开始评测（started 文件出现）。返回 (退出码, 开始的时刻)：

    (None, 时刻)  开始评测了，还在跑；(退出码, None) 还没开始就结束了（比如缺 torch）；
    (None, None)  STARTUP_LIMIT 秒还没开始。
    """
    while True:
        if started.exists():
            return None, time.monotonic()
        try:
            returncode = proc.wait(timeout=0.02)
        except subprocess.TimeoutExpired:
            if time.monotonic() - launched > STARTUP_LIMIT:
                return None, None
            continue
        return returncode, (time.monotonic() if started.exists() else None)


# ---------------------------------------------------------------------------
# 预热模板：要 torch 的题，test.py 和学习者的子进程都从一个已经 import 了 torch 的进程 fork 出来
# （practice/warm.py）。一个评测器进程（judge.py、pytest）一个模板，第一次用到时启动
# ---------------------------------------------------------------------------


class _WarmProc:
    """从模板 fork 出来的 test.py 进程：不是这个进程的子进程，退出状态由模板写到 status 管道里。"""

    def __init__(self, pid: int, group: int, status_fd: int) -> None:
        self.pid, self.group, self.status_fd = pid, group, status_fd
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        import select

        if self.returncode is None:
            if not select.select([self.status_fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("test.py", timeout or 0)
            data = b""
            try:
                data = os.read(self.status_fd, 64)
            except OSError:
                pass
            self.close()
            text = data.decode("ascii", "replace").strip()
            # "T 退出码"；空的：模板没了（被学习者的代码结束了），test.py 也已经退出，退出状态不知道
            self.returncode = int(text[2:]) if text.startswith("T ") and text[2:].lstrip("-").isdigit() else 1
        return self.returncode

    def close(self) -> None:
        try:
            os.close(self.status_fd)
        except OSError:
            pass


class _WarmServer:
    def __init__(self, practice: Path) -> None:
        import socket

        self.lock = __import__("threading").Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.home = tempfile.TemporaryDirectory(prefix="judge-warm-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(practice / "warm.py"), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            cwd=self.home.name,  # 一个空的临时目录：从它 fork 出来的学习者顺着 /proc 找过来，这里什么都没有
            start_new_session=True,  # 终端的 Ctrl-C 不打到它和它 fork 出来的进程
        )
        theirs.close()
        self.sock = ours
        self.sock.settimeout(STARTUP_LIMIT)
        if self.sock.recv(64) != b'{"ready": true}':
            raise OSError("预热模板没能启动")
        self.sock.settimeout(30)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path, stdin: int, stdout: int, stderr: int) -> _WarmProc:
        import socket

        spec = cwd / "warm-spec.json"  # 环境变量（随机种子、结论文件）不经过模板：T 自己读这个文件
        fd = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"argv": argv, "env": env, "cwd": str(cwd)}, f, ensure_ascii=False)
        spec_fd = os.open(spec, os.O_RDONLY)
        os.unlink(spec)
        status_r, status_w = os.pipe()
        try:
            with self.lock:
                socket.send_fds(self.sock, [b"{}"], [stdin, stdout, stderr, spec_fd, status_w])
                reply = json.loads(self.sock.recv(1 << 12).decode("utf-8"))
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(spec_fd)
            os.close(status_w)
        return _WarmProc(int(reply["test"]), int(reply["group"]), status_r)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.home.cleanup()


_WARM: dict[Path, _WarmServer] = {}


def _warm_server(practice: Path) -> _WarmServer | None:
    """这个 practice/ 的预热模板（没有就启动一个）；起不来、或者设置了 JUDGE_WARM=0 就是 None。"""
    if os.environ.get("JUDGE_WARM", "1") == "0" or not (practice / "warm.py").is_file() \
            or not hasattr(__import__("socket"), "send_fds"):
        return None
    server = _WARM.get(practice)
    if server is not None and server.alive():
        return server
    try:
        server = _WARM[practice] = _WarmServer(practice)
    except OSError:
        return None
    if len(_WARM) == 1:
        import atexit

        atexit.register(lambda: [s.close() for s in _WARM.values()])
    return server


def _uses_torch(ex: Exercise) -> bool:
    return any("import torch" in ex.file(name).read_text(encoding="utf-8") for name in ("test.py", "solution.py"))


def wall_backstop(limit: float) -> float:
    """墙钟时间的兜底（秒）。时间限制算的是学习者代码所在子进程的 CPU 时间（由 test.py 那边用
    RLIMIT_CPU 卡住），机器再忙也不会冤枉人；墙钟只用来收拾睡着、卡死的情况，给得很宽。"""
    return 8 * limit + 60


def run_test(ex: Exercise, target: Path, timeout: float | None = None, seed: int | None = None) -> Verdict:
    """用 ex 的 test.py 评测 target 文件，返回结论；timeout 默认是这道题的时间限制。

    学习者的代码在 test.py 另起的子进程里运行（practice/isolation.py），看不到参考实现、随机种子和结论；
    结论由 test.py 这边写成 JSON，带着这里从标准输入交给它的一次性口令，口令不对的结论不算数。
    学习者的代码再怎么坏（死循环、崩溃、语法错误、os._exit），这里都只返回一个结论，不抛异常。
    seed：这次评测的随机种子；默认看环境变量 JUDGE_SEED，没有就现抽一个。
    """
    import secrets

    limit = ex.time_limit if timeout is None else timeout
    if not target.is_file():
        return Verdict("not_started", limit=limit)
    if seed is None:
        text = os.environ.get("JUDGE_SEED", "").strip()
        seed = int(text) if text.isdigit() else secrets.randbelow(10**9) + 1
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="judge-") as tmp_name:
        tmp = Path(tmp_name)
        result_path = tmp / "result.json"
        env = dict(os.environ)
        env.update(
            JUDGE_TARGET=str(target.resolve()),
            JUDGE_RESULT=str(result_path),
            JUDGE_SEED=str(seed),
            JUDGE_TIME_LIMIT=f"{limit:g}",
            JUDGE_NONCE="stdin",
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONIOENCODING="utf-8",
            PYTHONUNBUFFERED="1",
            # 题目里的张量都很小：torch 的多线程在忙的机器上只会空转（学习者的子进程也一样设）
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
        )
        started = tmp / "started"  # judgekit.main() 开始评测时创建它
        env["JUDGE_STARTED"] = str(started)
        launched = time.monotonic()
        warm = _warm_server(ex.folder.parent) if _uses_torch(ex) else None
        with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
            if warm is not None:  # test.py 和学习者的子进程从预热模板 fork（practice/warm.py）
                nonce_r, nonce_w = os.pipe()
                os.write(nonce_w, (nonce + "\n").encode())
                os.close(nonce_w)
                try:
                    proc = warm.spawn([str(ex.file("test.py"))], env, tmp, nonce_r, out.fileno(), err.fileno())
                finally:
                    os.close(nonce_r)
            else:
                proc = subprocess.Popen(
                    [sys.executable, str(ex.file("test.py"))],
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    cwd=tmp,
                    env=env,
                    start_new_session=True,  # 自成一个进程组：超时时一起结束；Ctrl-C 也不会直接打到它
                )
                assert proc.stdin is not None
                try:
                    proc.stdin.write((nonce + "\n").encode())
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                returncode, start = _wait_for_start(proc, started, launched)
                if returncode is None and start is None:
                    _kill(proc)
                    return Verdict("crash", limit=limit, detail=_tail(tmp / "stderr", 15),
                                   message=f"评测在 {STARTUP_LIMIT} 秒内没能开始：test.py 导入依赖（比如 torch）"
                                           "太慢或者卡住了，这不是你的代码的问题")
                if returncode is None:
                    backstop = wall_backstop(limit)
                    returncode = proc.wait(timeout=max(0.0, backstop - (time.monotonic() - start)))
            except subprocess.TimeoutExpired:
                _kill(proc)
                return Verdict("timeout", seconds=time.monotonic() - start, limit=limit,
                               output=_tail(tmp / "stdout", 6))
            except BaseException:  # Ctrl-C：先收拾掉子进程再往外抛
                _kill(proc)
                raise
        seconds = time.monotonic() - (start or launched)
        output = _tail(tmp / "stdout")

        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None
        if isinstance(result, dict) and result.get("nonce") != nonce:
            return Verdict("crash", message="结论文件不是评测写的（口令对不上）：评测不认它", output=output,
                           seconds=seconds, limit=limit)
        if isinstance(result, dict) and result.get("verdict") == "passed" and returncode != 0:
            # test.py 写完“通过”就以 0 退出；结论是“通过”、进程却被杀了或出了错，这份结论不算数
            return Verdict("crash", message=f"结论是“通过”，评测进程却没有正常结束（退出码 {returncode}）：评测不认它",
                           output=output, seconds=seconds, limit=limit)
        if not isinstance(result, dict):
            # test.py 没写出结论：它自己没能启动（比如缺 torch），或者进程被杀了
            stderr = _tail(tmp / "stderr", 15)
            missing = re.search(r"No module named '([\w.]+)'", stderr)
            if missing:
                module = missing.group(1)
                message = f"评测需要的模块 {module} 没有安装（pip install {module.split('.')[0]}）"
            elif returncode < 0:
                message = f"评测进程被信号 {-returncode} 结束了"
            else:
                message = f"评测没有给出结论（退出码 {returncode}）"
            return Verdict("crash", message=message, detail=stderr, output=output, seconds=seconds, limit=limit)

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
            limit=limit,
            seed=int(result.get("seed") or seed),
            fence=str(result.get("fence", "")),
        )


# ---------------------------------------------------------------------------
# 工作区和进度文件
# ---------------------------------------------------------------------------


class Workspace:
    """学习者自己的东西：workspace/NNN_slug.py 和进度文件 .progress.json，都在 home 目录下。

    home 默认是 practice/ 本身（两者都被 git 忽略）；环境变量 JUDGE_HOME 可以把它们放到别处。
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.folder = home / "workspace"
        self.progress_file = home / ".progress.json"

    @classmethod
    def from_env(cls, default: Path = PRACTICE) -> Workspace:
        override = os.environ.get("JUDGE_HOME")
        return cls(Path(override).expanduser().resolve() if override else default)

    def file(self, ex: Exercise) -> Path:
        return self.folder / f"{ex.name}.py"


class Progress:
    """进度文件：每道题（按 slug 记，编号以后可能因为插题而变）评测了几次、最近一次的结论、
    看了几条提示，以及最近在做哪道题（"last"）。每次改动都整体重写，先写临时文件再改名。

    文件坏了（不是 JSON、结构不对）就改名成 .broken、从头记录，notice 里是给读者的一句说明。
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.notice: str | None = None
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
                self.notice = f"进度文件 {show_path(path)} 读不出来，已改名为 {broken.name}，从头记录。"

    def entry(self, ex: Exercise) -> dict[str, Any]:
        return self.data["exercises"].setdefault(ex.slug, {})

    def peek(self, ex: Exercise) -> dict[str, Any]:
        entry = self.data["exercises"].get(ex.slug, {})
        return entry if isinstance(entry, dict) else {}

    def passed(self, ex: Exercise) -> bool:
        return self.peek(ex).get("status") == "passed"

    def attempts(self, ex: Exercise) -> int:
        return int(self.peek(ex).get("attempts", 0))

    def worked_on(self, ex: Exercise) -> None:
        """记下“最近在做这道题”（start、test、hint 都算）。不存盘，和别的改动一起存。"""
        self.data["last"] = ex.slug

    def last_worked(self, exercises: list[Exercise]) -> Exercise | None:
        return next((ex for ex in exercises if ex.slug == self.data.get("last")), None)

    def record_test(self, ex: Exercise, verdict: str, mtime_ns: int | None) -> None:
        entry = self.entry(ex)
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        entry["status"] = "passed" if verdict == "passed" else "failed"
        entry["last_verdict"] = verdict
        entry["tested_mtime_ns"] = mtime_ns
        entry["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.worked_on(ex)
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

    def next_exercise(self, exercises: list[Exercise], after: Exercise | None = None) -> Exercise | None:
        """下一题：after（默认是最近在做的那道）之后第一道没通过的；后面都通过了，就从头找。

        什么都还没做过时就是第一道没通过的题。全部通过了返回 None。
        """
        after = after or self.last_worked(exercises)
        start = after.number if after else 0
        ordered = exercises[start:] + exercises[:start]
        return next((ex for ex in ordered if not self.passed(ex)), None)

    def done_count(self, exercises: list[Exercise]) -> int:
        return sum(self.passed(ex) for ex in exercises)
