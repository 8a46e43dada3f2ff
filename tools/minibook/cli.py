"""书里每个命令行工具共用的约定：steps.py、notebook.py、diagrams.py、judge.py 都这样写。

    from minibook import cli

    def main(argv: list[str] | None = None) -> int:
        parser = cli.ArgumentParser(prog="python tools/steps.py", description="……")
        sub = parser.add_subparsers(title="命令", dest="command", required=True)
        p = sub.add_parser("build", help="……")
        p.add_argument("chapter", help="章号")
        p.set_defaults(func=cmd_build)
        return cli.dispatch(parser, argv)       # 解析、调用 args.func(args)，读者的错误 → 一行中文、退出码 2

    if __name__ == "__main__":
        cli.run(main)                           # SIGPIPE、Ctrl-C、sys.exit

约定：
- 帮助、用法和 argparse 自己的报错都是中文：argparse 的每一句提示都经过 gettext（它的翻译钩子），
  这里的 ArgumentParser 在 argparse 工作时把 gettext 指向书附带的中文译文
  （locale/zh_CN/LC_MESSAGES/minibook-argparse.po / .mo）；不改 argparse 的英文字符串，也不碰它的私有字段。
- 读者能自己纠正的错误（章号不存在、文件缺失……）抛 UserError（或它的子类）：打印一行
  "错误：……" 到 stderr，退出码 2，不打印 traceback。命令写错（argparse 报的错）也是退出码 2。
- 退出码：0 成功，1 检查没通过（测试失败、notebook 与源不一致……），2 用法或读者的错误，130 被 Ctrl-C 打断。
- 跑得久的步骤用 progress(...) 显示已用时间：终端里是一行原地刷新的状态；输出不是终端时只偶尔打一行。
"""

from __future__ import annotations

import argparse
import ast
import gettext
import os
import signal
import struct
import sys
import threading
import time
import unicodedata
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, NoReturn, TextIO

DOMAIN = "minibook-argparse"
LANGUAGE = "zh_CN"
LOCALEDIR = Path(__file__).resolve().parent / "locale"
PO_FILE = LOCALEDIR / LANGUAGE / "LC_MESSAGES" / f"{DOMAIN}.po"
MO_FILE = PO_FILE.with_suffix(".mo")

gettext.bindtextdomain(DOMAIN, str(LOCALEDIR))


class UserError(Exception):
    """给读者看的错误：一行中文，说清楚发生了什么、该怎么办。工具打印它，退出码 2。"""


@contextmanager
def chinese_messages() -> Iterator[None]:
    """在这段时间里，gettext（argparse 取提示语的地方）查书附带的中文译文。

    gettext 按 textdomain() 选译文文件、按环境变量 LANGUAGE 选语言；两者只在这段时间里改，
    之后原样恢复，所以不影响别的库，也不会传给工具启动的子进程。
    """
    old_domain, old_language = gettext.textdomain(), os.environ.get("LANGUAGE")
    gettext.textdomain(DOMAIN)
    os.environ["LANGUAGE"] = LANGUAGE
    try:
        yield
    finally:
        gettext.textdomain(old_domain)
        if old_language is None:
            os.environ.pop("LANGUAGE", None)
        else:
            os.environ["LANGUAGE"] = old_language


class ArgumentParser(argparse.ArgumentParser):
    """说中文的 ArgumentParser：帮助、用法、报错都用中文；子命令的解析器也是这个类。

    argparse 在构造（"参数""选项"两个标题、-h 的说明）、解析、格式化（"用法："）和报错时取提示语，
    这几个公开入口都放进 chinese_messages() 里（建参数时的报错是写工具的人的错，不在此列）。
    默认保留描述和 epilog 的换行（用法示例照原样显示）。
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        with chinese_messages():
            super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):
        with chinese_messages():
            return super().add_subparsers(**kwargs)

    def parse_args(self, args=None, namespace=None):
        with chinese_messages():  # "多余的参数" 是在 parse_args 里、parse_known_args 之后拼的
            return super().parse_args(args, namespace)

    def parse_known_args(self, args=None, namespace=None):
        with chinese_messages():
            return super().parse_known_args(args, namespace)

    def parse_intermixed_args(self, args=None, namespace=None):
        with chinese_messages():
            return super().parse_intermixed_args(args, namespace)

    def parse_known_intermixed_args(self, args=None, namespace=None):
        with chinese_messages():
            return super().parse_known_intermixed_args(args, namespace)

    def format_usage(self) -> str:
        with chinese_messages():
            return super().format_usage()

    def format_help(self) -> str:
        with chinese_messages():
            return super().format_help()

    def error(self, message: str) -> NoReturn:
        """命令写错：用法、一行中文错误、去哪里看完整帮助。退出码 2。"""
        with chinese_messages():
            self.print_usage(sys.stderr)
            text = gettext.gettext("%(prog)s: error: %(message)s\n") % {"prog": self.prog, "message": message}
        self.exit(2, f"{text.rstrip()}（{self.prog} -h 查看帮助）\n")


def fail(message: object) -> int:
    """打印一行 "错误：……" 到 stderr，返回退出码 2。"""
    print(f"错误：{message}", file=sys.stderr)
    return 2


def dispatch(parser: argparse.ArgumentParser, argv: list[str] | None = None,
             errors: tuple[type[BaseException], ...] = (UserError,)) -> int:
    """解析命令行，调用子命令设下的 func(args)，把读者的错误变成一行中文（退出码 2）。"""
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except errors as e:
        return fail(e)


def run(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> NoReturn:
    """工具的入口：`tool.py | head` 不报 BrokenPipeError，Ctrl-C 只说一句"已中断"。"""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        code = main(argv)
    except KeyboardInterrupt:
        print("\n已中断", file=sys.stderr)
        code = 130
    sys.exit(code)


# ---------------------------------------------------------------- 对齐与进度


def display_width(text: str) -> int:
    """终端里的显示宽度：东亚宽字符（汉字、全角标点）占两列。"""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def ljust(text: str, width: int) -> str:
    """按显示宽度补空格到 width 列（str.ljust 按字符数，汉字会对不齐）。"""
    return text + " " * max(0, width - display_width(text))



def format_seconds(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds} 秒" if seconds < 60 else f"{seconds // 60} 分 {seconds % 60:02d} 秒"


@contextmanager
def progress(label: str, *, stream: TextIO | None = None, every: float = 60.0,
             tick: float = 1.0) -> Iterator[None]:
    """一个跑得久的步骤在跑时，让读者看到"在跑什么、跑了多久"。

    终端里：一行 "label … 12 秒" 每秒原地刷新，步骤结束时擦掉（结果由调用者打印）。
    不是终端（重定向到文件、CI 日志）：每隔 every 秒打一行 "label … 仍在运行（已 1 分 00 秒）"，
    短步骤一行也不打。
    """
    stream = stream or sys.stdout
    tty = stream.isatty()
    start = time.monotonic()
    done = threading.Event()

    def show() -> None:
        last_line = start
        while not done.wait(tick if tty else min(every, tick * 5)):
            elapsed = time.monotonic() - start
            if tty:
                stream.write(f"\r\033[K{label} … {format_seconds(elapsed)}")
                stream.flush()
            elif time.monotonic() - last_line >= every:
                last_line = time.monotonic()
                stream.write(f"{label} … 仍在运行（已 {format_seconds(elapsed)}）\n")
                stream.flush()

    thread = threading.Thread(target=show, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if tty:
            stream.write("\r\033[K")
            stream.flush()


# ---------------------------------------------------------------- 译文：.po → .mo


def read_po(path: Path = PO_FILE) -> dict[str, str]:
    """读 .po 文件：msgid → msgstr（复数形式按 gettext 的做法用 \\0 连起来）。只认书里用到的写法。"""
    catalog: dict[str, str] = {}
    entry: dict[str, list[str]] = {}
    key = None

    def flush() -> None:
        if "msgid" in entry:
            msgid = "".join(entry["msgid"])
            if "msgid_plural" in entry:
                msgid += "\0" + "".join(entry["msgid_plural"])
                forms = sorted(k for k in entry if k.startswith("msgstr["))
                catalog[msgid] = "\0".join("".join(entry[k]) for k in forms)
            else:
                catalog[msgid] = "".join(entry.get("msgstr", []))
        entry.clear()

    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):
            if key is None:
                raise ValueError(f"{path}:{n}: 续行前面没有 msgid / msgstr")
            entry[key].append(ast.literal_eval(line))
            continue
        key, _, rest = line.partition(" ")
        if key == "msgid":
            flush()
        entry[key] = [ast.literal_eval(rest)]
    flush()
    return catalog


def mo_bytes(catalog: dict[str, str]) -> bytes:
    """按 GNU gettext 的 .mo 格式（小端、不带散列表）写出译文表。"""
    keys = sorted(catalog)
    ids = [k.encode("utf-8") for k in keys]
    strs = [catalog[k].encode("utf-8") for k in keys]
    header = 7 * 4
    ids_table = header
    strs_table = ids_table + 8 * len(keys)
    data = strs_table + 8 * len(keys)
    offsets: list[int] = []
    blob = b""
    for s in ids + strs:
        offsets += [len(s), data + len(blob)]
        blob += s + b"\0"
    return (struct.pack("<7I", 0x950412DE, 0, len(keys), ids_table, strs_table, 0, 0)
            + struct.pack(f"<{len(offsets)}I", *offsets) + blob)


def argparse_messages(source: Path | None = None) -> list[str]:
    """当前 Python 的 argparse 交给 gettext 的全部提示语（复数形式是 "单数\\0复数"）。"""
    source = source or Path(argparse.__file__)
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "ngettext"):
            texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if texts:
                found.add("\0".join(texts[:2]))
    return sorted(found)


def _main(argv: Iterable[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m minibook.cli", description="书的命令行工具共用的中文译文")
    sub = parser.add_subparsers(title="命令", dest="command", required=True)
    sub.add_parser("compile", help=f"由 {PO_FILE.name} 重新生成 {MO_FILE.name}")
    sub.add_parser("missing", help="列出当前 Python 的 argparse 里还没有译文的提示语")
    args = parser.parse_args(list(argv) if argv is not None else None)
    catalog = read_po()
    if args.command == "compile":
        MO_FILE.write_bytes(mo_bytes(catalog))
        print(f"写出 {MO_FILE}（{len(catalog) - 1} 条译文）")
        return 0
    missing = [m for m in argparse_messages() if not catalog.get(m)]
    for m in missing:
        print(repr(m))
    print(f"{len(missing)} 条没有译文")
    return 1 if missing else 0


if __name__ == "__main__":
    run(_main)
