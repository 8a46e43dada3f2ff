#!/usr/bin/env python
"""逐章搭建、查看、检查《手写 mini-sglang》的源码树。

    python tools/steps.py list              全书章节与状态
    python tools/steps.py build 7           搭出第 7 章的树到 build/ch07/
    python tools/steps.py tree 7            第 7 章的文件树（标出新建 / 修改 / 提前引入）
    python tools/steps.py diff 7            第 7 章相对第 6 章改了什么
    python tools/steps.py run 7 -- CMD ...  在第 7 章的树里运行命令（已设好 PYTHONPATH）
    python tools/steps.py check [0 3-5]     逐章搭树、跑 main、跑测试，最后给出报告
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # 不安装也能用：minibook 就在 tools/ 里

from minibook import chapters as C  # noqa: E402

MAIN_TIMEOUT = 900
TEST_TIMEOUT = 1800


def cmd_list(_: argparse.Namespace) -> int:
    stage = None
    for ch in C.load_manifest():
        if ch.stage != stage:
            stage = ch.stage
            print(f"\n{stage}")
        if ch.planned:
            print(f"  {ch.number:>2}  {ch.title}（待写）")
            continue
        try:
            counts = "文件 " + C.changes(ch.number).header().removeprefix("到这一章为止的文件：")
        except C.ChapterError as e:
            counts = f"快照有问题：{e}"
        print(f"  {ch.number:>2}  {ch.title:<16} {ch.main}  {counts}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    tree = C.build(C.get_chapter(args.chapter).number, force=args.force)
    rel = os.path.relpath(tree)
    ch = C.get_chapter(args.chapter)
    print(f"已搭好第 {ch.number} 章「{ch.title}」：{rel}/")
    print("在这棵树里动手：")
    tools = os.path.relpath(C.REPO / "tools", tree)
    print(f"  cd {rel} && export PYTHONPATH=$PWD:$PWD/{tools}   # 这一章的 minisgl，加上书的辅助包 minibook")
    print(f"  python {ch.main}")
    print("  python -m pytest tests")
    print(f"或者不用 cd：python tools/steps.py run {ch.number} -- python {ch.main}")
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    ch = C.get_chapter(args.chapter)
    print(C.changes(ch.number).header())
    print(C.tree_text(ch.number))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    print(C.diff_text(C.get_chapter(args.chapter).number), end="")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    command = [c for c in args.command if c != "--"]
    if not command:
        raise C.ChapterError("run 后面要跟命令，例如：python tools/steps.py run 1 -- python examples/ch01_core.py")
    tree = C.build(C.get_chapter(args.chapter).number)
    return subprocess.call(command, cwd=tree, env=_tree_env(tree))


def _tree_env(tree: Path) -> dict[str, str]:
    return {**os.environ, **C.tree_env(tree)}


@dataclass
class Report:
    chapter: C.Chapter
    counts: str = ""
    main_ok: bool | None = None
    tests: str = ""
    tests_ok: bool | None = None
    seconds: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.main_ok) and bool(self.tests_ok)


def _run_step(cmd: list[str], tree: Path, timeout: float) -> tuple[bool, str]:
    try:
        proc = subprocess.run(cmd, cwd=tree, env=_tree_env(tree), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"超过 {timeout:.0f} 秒没有结束"
    return proc.returncode == 0, proc.stdout + proc.stderr


def _tail(text: str, n: int = 25) -> str:
    return "\n".join("      " + line for line in text.rstrip().splitlines()[-n:])


def check_chapter(ch: C.Chapter) -> Report:
    """在 build/check/ 里单独搭这一章（不碰读者的 build/chNN），跑 main，再跑树里的全部测试。"""
    report = Report(ch)
    start = time.monotonic()
    try:
        report.counts = C.changes(ch.number).header().removeprefix("到这一章为止的文件：")
        copies = C.unchanged_copies(ch.number)
        if copies:
            raise C.ChapterError(f"快照里这些文件与上一章一字不差（不是修改，删掉它们）：{'、'.join(copies)}")
        tree = C.build(ch.number, dest=C.BUILD / "check" / f"ch{ch.number:02d}", force=True)
    except C.ChapterError as e:
        report.error = str(e)
        report.seconds = time.monotonic() - start
        return report
    print(f"  文件：{report.counts}", flush=True)

    t = time.monotonic()
    report.main_ok, out = _run_step([sys.executable, ch.main], tree, MAIN_TIMEOUT)
    print(f"  main：{ch.main}  {'通过' if report.main_ok else '失败'}（{time.monotonic() - t:.1f} 秒）", flush=True)
    if not report.main_ok:
        print(_tail(out))

    t = time.monotonic()
    report.tests_ok, out = _run_step([sys.executable, "-m", "pytest", "-q", "tests"], tree, TEST_TIMEOUT)
    summary = re.findall(r"^=*\s*(\d+ (?:passed|failed|errors?|skipped)[^=\n]*?) in [\d.]+s.*$", out, re.M)
    report.tests = summary[-1] if summary else "没有测试结果"
    if report.tests_ok and " passed" not in report.tests:
        report.tests_ok = False  # 一个测试都没跑也算失败
    print(f"  测试：{report.tests}（{time.monotonic() - t:.1f} 秒）", flush=True)
    if not report.tests_ok:
        print(_tail(out, 40))
    report.seconds = time.monotonic() - start
    return report


def _pad(text: str, width: int) -> str:
    """按终端显示宽度补空格：一个汉字占两列。"""
    shown = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(1, width - shown)


def _parse_selection(items: list[str]) -> list[C.Chapter]:
    chapters = C.load_manifest()
    if not items:
        return C.written_chapters(chapters)
    picked: list[C.Chapter] = []
    for item in items:
        if re.fullmatch(r"\d+-\d+", item):
            lo, hi = map(int, item.split("-"))
            picked += [C.get_chapter(n, chapters) for n in range(lo, hi + 1)]
        else:
            picked.append(C.get_chapter(item, chapters))
    return picked


def cmd_check(args: argparse.Namespace) -> int:
    selected = _parse_selection(args.chapters)
    # 先把模型准备好（第一次运行时下载、转换）：离线时在这里给出一条清楚的说明，而不是几十个失败的测试
    from minibook.models import ModelPrepareError, prepare_all

    try:
        prepare_all()
    except ModelPrepareError as e:
        raise C.ChapterError(f"准备模型失败，没法检查章节：\n{e}") from None
    reports = []
    for ch in selected:
        print(f"\n第 {ch.number} 章「{ch.title}」", flush=True)
        report = check_chapter(ch)
        if report.error:
            print(f"  错误：{report.error}")
        reports.append(report)

    print(f"\n章节  {_pad('文件（新建/修改/提前引入）', 36)}{_pad('main', 6)}{_pad('测试', 26)}    秒")
    for r in reports:
        main = "—" if r.main_ok is None else ("通过" if r.main_ok else "失败")
        tests = r.tests or ("—" if not r.error else "坏快照")
        print(f"ch{r.chapter.number:02d}  {_pad(r.counts or '—', 36)}{_pad(main, 6)}{_pad(tests, 26)}"
              f"{r.seconds:5.1f}  {'✓' if r.ok else '✗'}")
    failed = [r for r in reports if not r.ok]
    print(f"\n合计：{len(reports) - len(failed)} 章通过，{len(failed)} 章失败")
    return 1 if failed else 0


class ChineseParser(argparse.ArgumentParser):
    """命令写错时用中文说明，并给出完整用法（argparse 自带的提示是英文）。"""

    def error(self, message: str) -> None:
        for english, chinese in (("the following arguments are required:", "缺少参数："),
                                 ("invalid choice:", "没有这个命令："), ("unrecognized arguments:", "多余的参数：")):
            message = message.replace(english, chinese)
        print(f"错误：命令写得不对（{message}）。用法：\n{__doc__.strip()}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    parser = ChineseParser(prog="steps.py", description="逐章搭建与检查《手写 mini-sglang》",
                           usage="python tools/steps.py {list,build,tree,diff,run,check} ...")
    parser._positionals.title = "命令"
    parser._optionals.title = "选项"
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ChineseParser)
    sub.add_parser("list", help="全书章节").set_defaults(func=cmd_list)
    p = sub.add_parser("build", help="搭出第 N 章的树到 build/chNN/")
    p.add_argument("chapter")
    p.add_argument("--force", action="store_true", help="覆盖 build/chNN 里你改过的文件")
    p.set_defaults(func=cmd_build)
    for name, func, text in (("tree", cmd_tree, "第 N 章的文件树"), ("diff", cmd_diff, "第 N 章相对上一章的 diff")):
        p = sub.add_parser(name, help=text)
        p.add_argument("chapter")
        p.set_defaults(func=func)
    p = sub.add_parser("run", help="在第 N 章的树里运行命令")
    p.add_argument("chapter")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("check", help="逐章搭树、跑 main 和测试")
    p.add_argument("chapters", nargs="*", help="章号或范围，如 0 3-5；不写就检查全部已写的章节")
    p.set_defaults(func=cmd_check)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except C.ChapterError as e:
        print(f"错误：{e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # steps.py list | head 不报 BrokenPipeError
    sys.exit(main())
