#!/usr/bin/env python
"""逐章搭建、查看、检查《手写 mini-sglang》的源码树（python tools/steps.py -h 查看用法）。"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # 不安装也能用：minibook 就在 tools/ 里

from minibook import carry as K  # noqa: E402
from minibook import chapters as C  # noqa: E402
from minibook import cli  # noqa: E402

PROG = "python tools/steps.py"
MAIN_TIMEOUT = 900
TEST_TIMEOUT = 1800
STOP_GRACE = 15  # run：Ctrl-C / SIGTERM 之后等命令自己收尾的秒数，过了才 SIGTERM、再 SIGKILL
JUNIT = ".steps-tests.xml"  # check 让 pytest 写下每个测试的结果（隐藏文件，不算树里的改动）


def _examples() -> str:
    """用法示例里的章号取已经写好的章节，照着敲就能跑。"""
    try:
        written = C.written_chapters()
    except C.ChapterError:
        written = []
    last = written[-1] if written else None
    n, main = (last.number, last.main) if last else (1, "examples/ch01_core.py")
    first = written[0].number if written else 0
    rows = [("list", "全书章节；文件计数只数 minisgl/ 下的文件"),
            (f"build {n}", f"搭出第 {n} 章的树到 build/ch{n:02d}/，在里面随便改、随便跑"),
            (f"tree {n}", f"第 {n} 章的文件树（标出新建 / 修改 / 提前引入）"),
            (f"diff {n}", f"第 {n} 章相对上一章改了什么"),
            (f"run {n} -- python {main}", f"在第 {n} 章的树里运行命令（按你改过的样子；树不存在就先搭）"),
            (f"carry {first}", f"改了第 {first} 章快照里的文件之后：把改动带进后面各章自己的副本"),
            ("check", "逐章搭树、跑 main、跑测试，最后给出报告"),
            (f"check {first} {max(first, n - 1)}-{n}", "只检查这几章")]
    width = max(cli.display_width(cmd) for cmd, _ in rows) + len(PROG) + 3
    return "示例：\n" + "\n".join(f"  {cli.ljust(f'{PROG} {cmd}', width)}{text}" for cmd, text in rows)


# ---------------------------------------------------------------- list / build / tree / diff / run


def cmd_list(_: argparse.Namespace) -> int:
    chapters = C.load_manifest()
    rows: list[tuple[str, str, str, str] | str] = []
    stage = None
    for ch in chapters:
        if ch.stage != stage:
            stage = ch.stage
            rows.append(stage)
        if ch.planned:
            rows.append((f"{ch.number:>2}", ch.title, "（待写）", ""))
            continue
        try:
            c = C.changes(ch.number, chapters)
            counts = f"{c.count()} 个（新建 {c.count('new')}，修改 {c.count('changed')}，提前引入 {c.count('early')}）"
        except C.ChapterError as e:
            counts = f"快照有问题：{e}"
        rows.append((f"{ch.number:>2}", ch.title, ch.main, counts))
    cells = [r for r in rows if isinstance(r, tuple)]
    widths = [max(cli.display_width(r[i]) for r in cells + [("章", "标题", "main", "")]) + 2 for i in range(3)]
    print(f"{cli.ljust('章', widths[0])}{cli.ljust('标题', widths[1])}{cli.ljust('main', widths[2])}"
          f"到这一章为止 minisgl/ 下的文件")
    for row in rows:
        if isinstance(row, str):
            print(row)
        else:
            print(("".join(cli.ljust(cell, w) for cell, w in zip(row, widths)) + row[3]).rstrip())
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    ch = C.get_chapter(args.chapter)
    tree = C.build(ch.number, force=args.force)
    rel = os.path.relpath(tree)
    print(f"已搭好第 {ch.number} 章「{ch.title}」：{rel}/")
    print("在这棵树里动手：")
    tools = os.path.relpath(C.REPO / "tools", tree)
    print(f"  cd {rel} && export PYTHONPATH=$PWD:$PWD/{tools}   # 这一章的 minisgl，加上书的辅助包 minibook")
    print(f"  python {ch.main}")
    print("  python -m pytest tests")
    print(f"或者不用 cd：{PROG} run {ch.number} -- python {ch.main}")
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    ch = C.get_chapter(args.chapter)
    print(f"{C.changes(ch.number).header()}  ← 计数只数 minisgl/ 下的文件")
    print(C.tree_text(ch.number))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    print(C.diff_text(C.get_chapter(args.chapter).number), end="")
    return 0


def cmd_carry(args: argparse.Namespace) -> int:
    ch = C.get_chapter(args.chapter)
    carried = (K.plan if args.dry_run else K.carry)(ch.number, rev=args.since)
    if not carried:
        print(f"第 {ch.number} 章快照里相对 {args.since} 的改动，后面各章的副本里没有要带进去的")
        return 0
    verb = "会合并进" if args.dry_run else "已合并进"
    for item in carried:
        print(f"{os.path.relpath(item.source, C.REPO)} 的改动{verb} {os.path.relpath(item.target, C.REPO)}")
    if not args.dry_run:
        print(f"看看每一章现在改了什么：{PROG} diff N")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    ch = C.get_chapter(args.chapter)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise C.ChapterError(f"run 后面要跟命令，例如：{PROG} run {ch.number} -- python {ch.main}")
    tree = ch.build_dir
    edits = C.local_edits(tree) if tree.exists() else []
    if edits:  # 读者改过这棵树：按他改过的样子运行，不重新搭
        print(f"（在你改过的 {os.path.relpath(tree)}/ 里运行：{_some(edits)}；"
              f"要回到原样：{PROG} build {ch.number} --force）", file=sys.stderr, flush=True)
    else:  # 没改过（或还没搭）：按快照搭一遍，拿到的是这一章现在的代码
        C.build(ch.number)
    try:
        return _run_until_done(command, cwd=tree, env=_tree_env(tree))
    except FileNotFoundError:
        raise C.ChapterError(f"找不到命令「{command[0]}」：它没装，或者名字拼错了"
                             f"（在 {os.path.relpath(tree)}/ 里运行）") from None
    except PermissionError:
        raise C.ChapterError(f"「{command[0]}」不能执行（没有执行权限）；"
                             f"Python 脚本请写成 python {command[0]}") from None


def _run_until_done(command: list[str], cwd: Path, env: dict[str, str]) -> int:
    """运行命令并等它结束，返回它的退出码（被信号杀死时按 shell 的习惯是 128 + 信号号）。

    不用 subprocess.call：它在 Ctrl-C 后只等 0.25 秒就 SIGKILL 子进程，服务器来不及停掉自己的
    子进程、删掉临时目录。这里 Ctrl-C 之后接着等：终端已经把 SIGINT 发给了整个前台进程组，命令自己
    收到了；我们收到的 SIGTERM 转给它。等 STOP_GRACE 秒还不结束才 SIGTERM，再等 5 秒才 SIGKILL；
    等的时候再按一次 Ctrl-C，就直接进到下一步。
    """
    proc = subprocess.Popen(command, cwd=cwd, env=env)

    def forward_sigterm(signum, frame):
        proc.send_signal(signal.SIGTERM)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, forward_sigterm)
    try:
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            code = _wait_for_cleanup(proc)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return code if code >= 0 else 128 - code


def _wait_for_cleanup(proc: subprocess.Popen) -> int:
    for escalate, seconds in ((None, STOP_GRACE), (proc.terminate, 5.0), (proc.kill, None)):
        if escalate is not None:
            print(f"（{' '.join(proc.args[:2])} 还没有结束，发送 "
                  f"{'SIGTERM' if escalate == proc.terminate else 'SIGKILL'}）", file=sys.stderr, flush=True)
            escalate()
        try:
            return proc.wait(timeout=seconds)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue
    return proc.wait()


def _span(chapters: list[C.Chapter]) -> str:
    """[第 4、5、6 章] → "4–6"；只有一章时就是它的章号。"""
    if not chapters:
        return ""
    first, last = chapters[0].number, chapters[-1].number
    return str(first) if first == last else f"{first}–{last}"


def _some(paths: list[str], n: int = 3) -> str:
    return "、".join(paths[:n]) + (f" 等 {len(paths)} 个文件" if len(paths) > n else "")


def _tree_env(tree: Path) -> dict[str, str]:
    return {**os.environ, **C.tree_env(tree)}


# ---------------------------------------------------------------- check


@dataclass
class TestCounts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    def __str__(self) -> str:
        parts = [f"{n} {word}" for n, word in ((self.passed, "通过"), (self.failed, "失败"),
                                                (self.errors, "出错"), (self.skipped, "跳过")) if n]
        return "，".join(parts) or "0 个"


@dataclass
class Report:
    chapter: C.Chapter
    counts: str = ""
    main_ok: bool | None = None
    own: TestCounts | None = None  # 本章自己的测试（tests/test_chNN_slug.py）
    earlier: TestCounts | None = None  # 前几章的测试；None = 没有重跑
    modified: list[str] = field(default_factory=list)  # 本章修改的、前几章就有的文件
    rerun_range: str = ""  # 重跑了哪几章的测试，如 "4–6"
    tests_ok: bool | None = None
    main_skipped: bool = False  # --skip-main / --skip-own-tests：notebook 已经跑过（CI 用）
    own_skipped: bool = False
    seconds: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.main_ok) and bool(self.tests_ok)


def _run_step(cmd: list[str], tree: Path, timeout: float, label: str) -> tuple[int | None, str]:
    """（退出码，输出）；超时的退出码是 None。"""
    try:
        with cli.progress(label):
            proc = subprocess.run(cmd, cwd=tree, env=_tree_env(tree), capture_output=True, text=True,
                                  timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"超过 {timeout:.0f} 秒没有结束"
    return proc.returncode, proc.stdout + proc.stderr


def _tail(text: str, n: int = 25) -> str:
    return "\n".join("      " + line for line in text.rstrip().splitlines()[-n:])


def _read_junit(path: Path, own_module: str) -> tuple[TestCounts, TestCounts]:
    """pytest 的 junit 报告 → （本章的测试，前几章的测试）的计数。own_module 形如 test_ch01_core。"""
    own, earlier = TestCounts(), TestCounts()
    for case in ET.parse(path).iter("testcase"):
        name = case.get("classname") or case.get("name") or ""  # tests.test_ch01_core[.TestClass]
        counts = own if own_module in name.split(".") else earlier
        if case.find("failure") is not None:
            counts.failed += 1
        elif case.find("error") is not None:
            counts.errors += 1
        elif case.find("skipped") is not None:
            counts.skipped += 1
        else:
            counts.passed += 1
    return own, earlier


def check_chapter(ch: C.Chapter, chapters: list[C.Chapter], rerun: bool | str = True,
                  skip_main: bool = False, skip_own_tests: bool = False, skip_own_k: str = "") -> Report:
    """在 build/check/ 里单独搭这一章（不碰读者的 build/chNN），跑 main，再跑测试。

    本章修改了前几章就有的文件，前几章的测试才可能被它弄坏，这时重跑树里的全部测试；
    只新建文件的一章只跑它自己的测试。rerun="all"：前面每一章的测试都在这棵树里重跑。
    skip_main / skip_own_tests：这一章的 notebook 已经在同一棵树里跑过它们（给 CI 用，同一件事不做两遍）；
    skip_own_k：本章的测试里 notebook 跑过的那一部分（pytest -k 表达式），只跑其余的。
    """
    report = Report(ch)
    start = time.monotonic()
    try:
        report.counts = C.changes(ch.number, chapters).header().removeprefix("到这一章为止的文件：")
        copies = C.unchanged_copies(ch.number, chapters)
        if copies:
            raise C.ChapterError(f"快照里这些文件与上一章一字不差（不是修改，删掉它们）：{'、'.join(copies)}")
        report.modified = C.modified_files(ch.number, chapters)
        tree = C.build(ch.number, dest=C.BUILD / "check" / f"ch{ch.number:02d}", force=True, chapters=chapters)
    except C.ChapterError as e:
        report.error = str(e)
        report.seconds = time.monotonic() - start
        return report
    print(f"  minisgl/ 下的文件：{report.counts}", flush=True)

    t = time.monotonic()
    if skip_main:
        report.main_ok, report.main_skipped = True, True
        print(f"  main：{ch.main}  跳过（--skip-main）", flush=True)
    else:
        code, out = _run_step([sys.executable, ch.main], tree, MAIN_TIMEOUT, f"  main：python {ch.main}")
        report.main_ok = code == 0
        print(f"  main：{ch.main}  {'通过' if report.main_ok else '失败'}（{time.monotonic() - t:.1f} 秒）",
              flush=True)
        if not report.main_ok:
            print(_tail(out))

    t = time.monotonic()
    rerun_all = rerun == "all"
    if rerun_all:
        earlier = [c for c in C.written_chapters(chapters) if c.number < ch.number]
    else:
        earlier = C.earlier_tests_to_rerun(ch.number, chapters) if rerun else []
    rerun = bool(earlier)
    report.rerun_range = _span(earlier)
    report.own_skipped = skip_own_tests
    targets = [e.test_file for e in earlier] + ([] if skip_own_tests else [ch.test_file])
    if not targets:
        report.tests_ok = True
        print("  测试：本章的跳过（--skip-own-tests），没有要重跑的前几章", flush=True)
        report.seconds = time.monotonic() - start
        return report
    junit = tree / JUNIT
    label = (f"  测试：第 {report.rerun_range} 章的测试" if skip_own_tests
             else f"  测试：本章与第 {report.rerun_range} 章的测试" if rerun else f"  测试：{ch.test_file}")
    own_module = Path(ch.test_file).stem
    # 只去掉本章测试文件里被选中的那些：前几章的测试不受这个表达式影响
    select = ["-k", f"not ({own_module} and ({skip_own_k}))"] if skip_own_k and not skip_own_tests else []
    code, out = _run_step([sys.executable, "-m", "pytest", "-q", "--rootdir=.", f"--junitxml={junit}", *select,
                           *targets], tree, TEST_TIMEOUT, label)
    ok = code == 0 or (bool(select) and code == 5)  # 5：-k 把剩下的都去掉了（全在 notebook 里跑过）
    try:
        report.own, earlier = _read_junit(junit, own_module)
    except (OSError, ET.ParseError):
        report.own, earlier = None, TestCounts()
    report.earlier = earlier if rerun else None
    # 一个测试都没跑（测试文件是空的、收集出错）也算失败：本章的测试至少要有一个通过，
    # 本章的跳过时，重跑的前几章的测试至少要有一个通过
    counted = report.earlier if skip_own_tests else report.own
    report.tests_ok = (ok and report.own is not None and counted is not None
                       and (counted.passed > 0 or bool(select) and counted.total == 0))
    seconds = f"{time.monotonic() - t:.1f} 秒"
    own = ("本章的跳过（--skip-own-tests）" if skip_own_tests
           else f"本章 {report.own}（-k 选中的跳过：{skip_own_k}）" if skip_own_k else f"本章 {report.own}")
    if report.own is None:
        print(f"  测试：没有测试结果（{seconds}）")
    elif rerun_all:
        print(f"  测试：{own}；前几章 {report.earlier}（--rerun-all：第 {report.rerun_range} 章的测试"
              f"都在这棵树里重跑）（{seconds}）")
    elif rerun:
        print(f"  测试：{own}；前几章 {report.earlier}"
              f"（本章改了前几章也用的 {_some(report.modified)}，第 {report.rerun_range} 章的测试重跑；"
              f"更早的章还没有这些文件）（{seconds}）")
    else:
        why = "按 --no-rerun 不重跑前几章的测试" if report.modified else "本章只新建文件，前几章的测试不会受影响，不重跑"
        print(f"  测试：{own}（{why}）（{seconds}）")
    if not report.tests_ok:
        print(_tail(out, 40))
    report.seconds = time.monotonic() - start
    return report


def _parse_selection(items: list[str], chapters: list[C.Chapter]) -> list[C.Chapter]:
    if not items:
        return C.written_chapters(chapters)
    picked: list[C.Chapter] = []
    for item in items:
        m = re.fullmatch(r"(?:ch)?(\d+)-(?:ch)?(\d+)", item)
        if m:
            lo, hi = int(m[1]), int(m[2])
            if lo > hi:
                raise C.ChapterError(f"范围「{item}」是空的（起点比终点大），是不是想写 {hi}-{lo}？")
            picked += [C.get_chapter(n, chapters) for n in range(lo, hi + 1)]
        else:
            picked.append(C.get_chapter(item, chapters))
    return list(dict.fromkeys(picked))  # 去掉重复，保持顺序


def cmd_check(args: argparse.Namespace) -> int:
    chapters = C.load_manifest()
    selected = _parse_selection(args.chapters, chapters)
    # 先把模型准备好（第一次运行时下载、转换）：离线时在这里给出一条清楚的说明，而不是几十个失败的测试
    from minibook.models import ModelPrepareError, prepare_all

    try:
        prepare_all()
    except ModelPrepareError as e:
        raise C.ChapterError(f"准备模型失败，没法检查章节：\n{e}") from None
    start = time.monotonic()
    reports = []
    for ch in selected:
        print(f"\n第 {ch.number} 章「{ch.title}」", flush=True)
        rerun = "all" if args.rerun_all else not args.no_rerun
        report = check_chapter(ch, chapters, rerun=rerun, skip_main=args.skip_main,
                               skip_own_tests=args.skip_own_tests, skip_own_k=args.skip_own_k)
        if report.error:
            print(f"  错误：{report.error}")
        reports.append(report)

    head = ["章节", "minisgl/ 下的文件（新建/修改/提前引入）", "main", "本章的测试", "前几章的测试", "秒"]
    rows = []
    for r in reports:
        main = "—" if r.main_ok is None else "跳过" if r.main_skipped else ("通过" if r.main_ok else "失败")
        own = ("跳过" if r.own_skipped and not r.error else str(r.own) if r.own is not None
               else ("坏快照" if r.error else "没有结果"))
        earlier = (f"第 {r.rerun_range} 章：{r.earlier}" if r.earlier is not None
                   else ("不重跑" if r.own is not None else "—"))
        rows.append([f"ch{r.chapter.number:02d}", r.counts or "—", main, own, earlier,
                     f"{r.seconds:.1f}", "✓" if r.ok else "✗"])
    widths = [max(cli.display_width(x[i]) for x in rows + [head]) + 2 for i in range(5)]
    print("\n" + "".join(cli.ljust(h, w) for h, w in zip(head, widths)) + head[5])
    for row in rows:
        print("".join(cli.ljust(c, w) for c, w in zip(row, widths)) + f"{row[5]:>4}  {row[6]}")
    failed = [r for r in reports if not r.ok]
    print(f"\n合计：{len(reports) - len(failed)} 章通过，{len(failed)} 章失败"
          f"（用时 {cli.format_seconds(time.monotonic() - start)}）")
    print("“前几章的测试”只在这一章修改了前几章的文件时重跑，而且只重跑已经有这些文件的那几章；"
          "只新建文件的一章弄不坏它们。")
    return 1 if failed else 0


# ---------------------------------------------------------------- 命令行


def main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(prog=PROG, description="逐章搭建、查看、检查《手写 mini-sglang》的源码树。",
                                epilog=_examples())
    sub = parser.add_subparsers(title="命令", dest="command", metavar="命令", required=True)
    sub.add_parser("list", help="全书章节与每章 minisgl/ 下的文件计数").set_defaults(func=cmd_list)
    p = sub.add_parser("build", help="搭出第 N 章的树到 build/chNN/")
    p.add_argument("chapter", metavar="N", help="章号")
    p.add_argument("--force", action="store_true", help="覆盖 build/chNN 里你改过的文件")
    p.set_defaults(func=cmd_build)
    for name, func, text in (("tree", cmd_tree, "第 N 章的文件树"), ("diff", cmd_diff, "第 N 章相对上一章的 diff")):
        p = sub.add_parser(name, help=text)
        p.add_argument("chapter", metavar="N", help="章号")
        p.set_defaults(func=func)
    p = sub.add_parser("carry", help="把第 N 章快照里的改动带进后面各章的副本（三方合并，冲突就停下）")
    p.add_argument("chapter", metavar="N", help="章号")
    p.add_argument("--since", metavar="REV", default="HEAD",
                   help="三方合并的基准：第 N 章那份文件在 git 的哪个版本里（默认 HEAD，即还没提交的改动）")
    p.add_argument("--dry-run", action="store_true", help="只列出会改哪些副本，不写")
    p.set_defaults(func=cmd_carry)
    p = sub.add_parser("run", help="在第 N 章的树里运行命令（按你改过的样子；树不存在就先搭）")
    p.add_argument("chapter", metavar="N", help="章号")
    p.add_argument("command", metavar="-- CMD", nargs=argparse.REMAINDER, help="要运行的命令，写在 -- 后面")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("check", help="逐章搭树、跑 main 和测试，给出报告")
    p.add_argument("chapters", metavar="N", nargs="*", help="章号或范围，如 0 3-5；不写就检查全部已写的章节")
    rerun = p.add_mutually_exclusive_group()
    rerun.add_argument("--no-rerun", action="store_true",
                       help="只跑每一章自己的测试，不重跑前几章的（快，但看不出本章弄坏了前几章）")
    rerun.add_argument("--rerun-all", action="store_true",
                       help="在这一章的树里重跑前面每一章的测试（不管本章改没改它们用的文件）")
    p.add_argument("--skip-main", action="store_true", help="不跑 main（给 CI 用：notebook 已经在同样的树里跑过）")
    p.add_argument("--skip-own-tests", action="store_true",
                   help="不跑本章自己的测试（给 CI 用：notebook 已经在同样的树里跑过）")
    p.add_argument("--skip-own-k", metavar="表达式", default="",
                   help="本章的测试里跳过 pytest -k 选中的那些（给 CI 用：notebook 已经在同样的树里跑过）")
    p.set_defaults(func=cmd_check)
    return cli.dispatch(parser, argv)


if __name__ == "__main__":
    cli.run(main)
