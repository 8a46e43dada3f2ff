#!/usr/bin/env python3
"""手写 mini-sglang · 练习评测器（rustlings 风格）。

    python practice/judge.py                列出全部练习，并告诉你下一题做哪个
    python practice/judge.py start N        把第 N 题的 starter 复制到工作区，开始做
    python practice/judge.py test N         评测你在工作区里写的第 N 题
    python practice/judge.py watch          开着它，保存文件就自动评测（Ctrl-C 退出）
    python practice/judge.py hint N         看第 N 题的下一条提示（每次多给一条）
    python practice/judge.py -h             全部命令

这个文件只管命令行和打印；读清单、拆题面、在子进程里评测、记进度都在书的辅助包里
（tools/minibook/judging.py，`pip install -e .` 装上；它和这里一样只用标准库）。
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

try:
    from minibook import cli
    from minibook.judging import (
        DEFAULT_TIME_LIMIT,
        Exercise,
        Progress,
        UserError,
        Verdict,
        Workspace,
        chapter_label,
        chapter_titles,
        load_exercises,
        read_problem,
        run_test,
        show_path,
    )
except ModuleNotFoundError as e:  # 还没装书的辅助包：说清楚怎么办，而不是一段 traceback
    if e.name != "minibook" and not (e.name or "").startswith("minibook."):
        raise
    print("错误：找不到书的辅助包 minibook（或者它太旧了）。在仓库根目录运行 pip install -e . 再试。",
          file=sys.stderr)
    sys.exit(2)

PRACTICE = Path(__file__).resolve().parent  # 清单就在 judge.py 旁边；工作区默认也在这里
WATCH_INTERVAL = 1.0

ENCOURAGEMENTS = (
    "漂亮！",
    "稳稳拿下。",
    "干得好，继续保持！",
    "又往完整的推理引擎走近了一步。",
    "一次比一次熟练了。",
    "随机输入全对上了，舒服。",
)


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


def indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def progress_bar(done: int, total: int, width: int = 20) -> str:
    filled = round(width * done / total) if total else 0
    return green("█" * filled) + dim("░" * (width - filled))


def judge_command() -> str:
    return f"python {show_path(Path(__file__).resolve())}"


# ---------------------------------------------------------------------------
# 一次评测要用的东西：清单、工作区、进度
# ---------------------------------------------------------------------------


class Session:
    def __init__(self) -> None:
        self.exercises = load_exercises(PRACTICE / "exercises.toml")
        self.workspace = Workspace.from_env(PRACTICE)
        self.cmd = judge_command()

    def progress(self) -> Progress:
        """每次重读：别的终端里可能刚用过 hint 或 test。"""
        progress = Progress(self.workspace.progress_file)
        if progress.notice:
            print(yellow(progress.notice), file=sys.stderr)
        return progress

    def find(self, arg: str) -> Exercise:
        """把命令行上的“N”变成一道题：接受 3、003、req_lengths、003_req_lengths。"""
        text, exercises = arg.strip(), self.exercises
        if text.isdigit():
            number = int(text)
            if 1 <= number <= len(exercises):
                return exercises[number - 1]
            if not exercises:
                raise UserError("清单里还没有练习")
            raise UserError(f"没有第 {number} 题：现有的练习编号是 1–{len(exercises)}（{self.cmd} list 看全部）")
        for ex in exercises:
            if text in (ex.slug, ex.name):
                return ex
        raise UserError(f"「{arg}」不是练习编号：请给一个数字，比如 1（{self.cmd} list 看全部）")

    def test_and_record(self, ex: Exercise, progress: Progress, timeout: float | None) -> Verdict:
        target = self.workspace.file(ex)
        if not target.is_file():
            return Verdict("not_started")
        mtime_ns = target.stat().st_mtime_ns
        verdict = run_test(ex, target, timeout)
        progress.record_test(ex, verdict.kind, mtime_ns)
        return verdict

    def up_next(self, progress: Progress) -> tuple[str, Exercise] | None:
        """接着做最近在做、还没通过的那道；否则是它之后第一道没通过的。全部通过了是 None。"""
        last = progress.last_worked(self.exercises)
        if last is not None and not progress.passed(last) and self.workspace.file(last).is_file():
            return "接着做", last
        nxt = progress.next_exercise(self.exercises, after=last)
        if nxt is None:
            return None
        return ("接着做" if self.workspace.file(nxt).is_file() else "下一题"), nxt


def print_verdict(s: Session, ex: Exercise, verdict: Verdict, progress: Progress, *, watching: bool = False) -> None:
    """评测结论。watching：在 watch 里（保存就会重新评测，另开终端才能运行别的命令），建议跟着变。"""
    cmd, n = s.cmd, ex.number
    elsewhere = "在另一个终端运行 " if watching else ""
    if verdict.fence:  # 评测照常有效（参考实现和结论本来就不在你的进程里），只是多了一层保护没搭上
        print(dim(f"   提醒：这台机器上没能给你的代码搭好只读的围栏（{verdict.fence}）"))
    if verdict.kind == "passed":
        print(green(bold(f"✅ 通过！{ex.label}")) + dim(f"  （{verdict.seconds:.1f} 秒）"))
        print(f"   {random.choice(ENCOURAGEMENTS)}")
        done, total = progress.done_count(s.exercises), len(s.exercises)
        print(f"   已完成 {done}/{total} {progress_bar(done, total)}")
        nxt = progress.next_exercise(s.exercises, after=ex)
        if nxt is None:
            print(green("   🎉 全部练习都通过了！"))
        elif s.workspace.file(nxt).is_file() and watching:
            print(f"   接着做：{nxt.label}（{show_path(s.workspace.file(nxt))}，保存就评测）")
        elif s.workspace.file(nxt).is_file():
            print(f"   接着做：{nxt.label} → {cyan(f'{cmd} test {nxt.number}')}")
        else:
            print(f"   下一题：{nxt.label} → {elsewhere}{cyan(f'{cmd} start {nxt.number}')}")
        return

    if verdict.kind == "not_started":
        print(yellow(f"· 还没开始：{ex.label}"))
        print(f"   先运行 {cyan(f'{cmd} start {n}')}，它会把题目的 starter 复制到工作区。")
        return

    if verdict.kind == "failed":
        print(red(bold(f"❌ 未通过：{ex.label}")))
        print(indent(verdict.message))
    elif verdict.kind == "timeout":
        limit = verdict.limit or ex.time_limit
        print(yellow(bold(f"⏰ 超时：{ex.label} 在 {limit:g} 秒内没有跑完，已被停止。")))
        print("   是不是有死循环？（比如 while 的条件永远成立，或者循环变量忘了更新）")
        more = f"--timeout {int(limit) * 2}"
        if watching:
            print(f"   如果确实需要更久：按 Ctrl-C 停下 watch，再用 {cyan(f'{cmd} watch {more}')} 重新开。")
        else:
            print(f"   如果确实需要更久，可以加 {more}。")
    elif verdict.kind == "syntax":
        where = show_path(Path(verdict.file)) if verdict.file else show_path(s.workspace.file(ex))
        print(red(bold(f"📝 语法错误：{where} 第 {verdict.line} 行")))
        if verdict.text:
            print(f"   {verdict.line:>4} | {verdict.text}")
            if verdict.offset:
                caret_col = cli.display_width(verdict.text[: max(0, verdict.offset - 1)])
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
    if watching:
        print(f"   改好保存，这里会自动重新评测；卡住了就{elsewhere}{cyan(f'{cmd} hint {n}')} 看提示")
    else:
        print(f"   改好保存后再运行 {cyan(f'{cmd} test {n}')}；卡住了就看提示：{cyan(f'{cmd} hint {n}')}")


# ---------------------------------------------------------------------------
# 命令
# ---------------------------------------------------------------------------


def _local_mark(ex) -> str:
    """清单里标在题目后面：要 torch 的题，或者因为别的原因只能在本地做的题（网页上没有编辑框）。"""
    if ex.stdlib_only:
        return ""
    return "（只能在本地做）" if getattr(ex, "local_only_reason", "") else "（需 torch）"


def cmd_list(args: argparse.Namespace, s: Session) -> int:
    progress = s.progress()
    titles = chapter_titles()
    header = ("状态", "编号", "标题", "章节", "难度")
    rows = []
    for ex in s.exercises:
        status = progress.peek(ex).get("status")
        icon = {"passed": "✅", "failed": "❌"}.get(status, "·")
        title = ex.title + _local_mark(ex)
        rows.append((icon, ex.code, title, chapter_label(ex.chapter, titles), ex.difficulty))
    widths = [max(cli.display_width(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        return " " + "  ".join(cli.ljust(cell, widths[j]) for j, cell in enumerate(row)).rstrip()

    print(bold("手写 mini-sglang · 练习"))
    print()
    print(bold(line(header)))
    for ex, row in zip(s.exercises, rows):
        text = line(row)
        if _local_mark(ex):  # 颜色在对齐之后加：控制符不占列宽
            text = text.replace(_local_mark(ex), dim(_local_mark(ex)), 1)
        print(text)
    print()
    done, total = progress.done_count(s.exercises), len(s.exercises)
    print(f"已完成 {done}/{total} {progress_bar(done, total)}")
    return 0


def print_next(s: Session, progress: Progress, *, watching: bool = False) -> None:
    if not s.exercises:
        print("清单里还没有练习。")
        return
    up = s.up_next(progress)
    if up is None:
        print(green("🎉 全部练习都通过了！"))
        return
    word, ex = up
    if word == "接着做" and watching:
        print(f"接着做：{bold(ex.label)}（{show_path(s.workspace.file(ex))}，保存就评测）")
    elif word == "接着做":
        print(f"接着做：{bold(ex.label)}")
        print(f"   在 {show_path(s.workspace.file(ex))} 里写，然后 {cyan(f'{s.cmd} test {ex.number}')}")
    else:
        where = "在另一个终端运行 " if watching else ""
        print(f"下一题：{bold(ex.label)} → {where}{cyan(f'{s.cmd} start {ex.number}')}")


def cmd_overview(args: argparse.Namespace, s: Session) -> int:
    cmd_list(args, s)
    print()
    print_next(s, s.progress())
    print(dim(f"（全部命令：{s.cmd} -h）"))
    return 0


def cmd_start(args: argparse.Namespace, s: Session) -> int:
    ex = s.find(args.exercise)
    target = s.workspace.file(ex)
    cmd = s.cmd
    if target.exists() and not args.force:
        print(yellow(f"工作区里已经有 {show_path(target)} 了，不会覆盖你的代码。"))
        print(f"   接着写它就好；要从头来过，加 --force：{cmd} start {ex.number} --force（旧文件会备份成 .bak）")
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.copyfile(target, target.with_name(target.name + ".bak"))
    shutil.copyfile(ex.file("starter.py"), target)
    progress = s.progress()
    progress.worked_on(ex)
    progress.save()

    print(green(bold(f"开始：{ex.label}")) + dim(f"（{chapter_label(ex.chapter, chapter_titles())} · {ex.difficulty}）"))
    print(f"   题目：{show_path(ex.file('problem.md'))}   （或 {cmd} show {ex.number}）")
    print(f"   在这里写代码：{bold(show_path(target))}")
    print(f"   写好了评测：{cyan(f'{cmd} test {ex.number}')}   或者开着 {cyan(f'{cmd} watch')}，保存就评测")
    print(f"   卡住了：{cyan(f'{cmd} hint {ex.number}')}")
    return 0


def cmd_test(args: argparse.Namespace, s: Session) -> int:
    ex = s.find(args.exercise)
    progress = s.progress()
    if s.workspace.file(ex).is_file():
        print(dim(f"评测 {ex.label} …"))
    verdict = s.test_and_record(ex, progress, args.timeout)
    print_verdict(s, ex, verdict, progress)
    return 0 if verdict.passed else 1


def cmd_show(args: argparse.Namespace, s: Session) -> int:
    ex = s.find(args.exercise)
    statement, hints = read_problem(ex)
    print(statement.rstrip())
    if hints:
        print()
        print(dim(f"（这道题有 {len(hints)} 条提示：{s.cmd} hint {ex.number}，每次多看一条）"))
    return 0


def cmd_hint(args: argparse.Namespace, s: Session) -> int:
    ex = s.find(args.exercise)
    _, hints = read_problem(ex)
    if not hints:
        print(f"{ex.label} 没有提示。题目在 {show_path(ex.file('problem.md'))}。")
        return 0
    progress = s.progress()
    entry = progress.entry(ex)
    shown = int(entry.get("hints", 0))
    progress.worked_on(ex)
    if shown >= len(hints):
        progress.save()
        print(yellow(f"{ex.label} 的提示已经全部给出了（{len(hints)}/{len(hints)}）："))
        for title, body in hints:
            print()
            print(bold(f"💡 {title}"))
            print(indent(body))
        print()
        print(f"还是卡住？可以看参考答案：{cyan(f'{s.cmd} solution {ex.number}')}")
        return 0
    title, body = hints[shown]
    entry["hints"] = shown + 1
    progress.save()
    print(bold(f"💡 {title}") + dim(f"  （{shown + 1}/{len(hints)} · {ex.label}）"))
    print(indent(body))
    left = len(hints) - shown - 1
    if left:
        print(dim(f"\n（还有 {left} 条提示：再运行一次 {s.cmd} hint {ex.number}）"))
    return 0


def cmd_solution(args: argparse.Namespace, s: Session) -> int:
    ex = s.find(args.exercise)
    progress = s.progress()
    if progress.attempts(ex) == 0 and not args.force:
        print(yellow(f"先自己试一次吧：{s.cmd} start {ex.number}，写完 {s.cmd} test {ex.number}。"))
        print(f"   评测过一次之后就能看答案；实在想现在看，加 --force：{s.cmd} solution {ex.number} --force")
        return 1
    print(bold(f"参考答案 · {ex.label}") + dim(f"   {show_path(ex.file('solution.py'))}"))
    print()
    print(ex.file("solution.py").read_text(encoding="utf-8").rstrip())
    print()
    print(dim("对照着看看：和你的写法哪里不一样？哪种更好读？"))
    return 0


def cmd_progress(args: argparse.Namespace, s: Session) -> int:
    progress = s.progress()
    titles = chapter_titles()
    done, total = progress.done_count(s.exercises), len(s.exercises)
    print(bold("学习进度"))
    percent = round(100 * done / total) if total else 0
    print(f"已完成 {done}/{total} {progress_bar(done, total)} {percent}%")
    chapters: dict[int, list[Exercise]] = {}
    for ex in s.exercises:
        chapters.setdefault(ex.chapter, []).append(ex)
    for chapter, items in chapters.items():
        ch_done = sum(progress.passed(ex) for ex in items)
        print()
        print(f"{bold(chapter_label(chapter, titles))}  {ch_done}/{len(items)} {progress_bar(ch_done, len(items), 10)}")
        width = max(cli.display_width(ex.label) for ex in items)
        for ex in items:
            entry = progress.peek(ex)
            notes = []
            if entry.get("attempts"):
                notes.append(f"评测 {entry['attempts']} 次")
            elif s.workspace.file(ex).is_file():
                notes.append("已开始，还没评测")
            if entry.get("hints"):
                notes.append(f"看了 {entry['hints']} 条提示")
            icon = {"passed": "✅", "failed": "❌"}.get(entry.get("status"), "· ")
            print(f"   {icon} {cli.ljust(ex.label, width)}  {dim(' · '.join(notes))}".rstrip())
    print()
    print_next(s, progress)
    return 0


def cmd_watch(args: argparse.Namespace, s: Session) -> int:
    """每秒看一眼工作区，哪个文件改了就评测哪个。--once：只处理一轮已有的改动就退出。"""
    any_failed = False

    def mtimes() -> dict[Exercise, int]:
        found = {}
        for ex in s.exercises:
            try:
                found[ex] = s.workspace.file(ex).stat().st_mtime_ns
            except OSError:
                pass
        return found

    def judge(ex: Exercise) -> None:
        nonlocal any_failed
        print()
        target = s.workspace.file(ex)
        try:
            untouched = target.read_bytes() == ex.file("starter.py").read_bytes()
        except OSError:
            return  # 刚被删掉或改名
        stamp = dim(f"[{time.strftime('%H:%M:%S')}]")
        if untouched:  # 刚 start 的题：还是起始代码，评测只会得到“未通过”，先不评
            print(f"{stamp} {bold(ex.label)} 已开始：{show_path(target)} 还是起始代码，改了保存就评测。")
            return
        print(f"{stamp} {dim(f'评测 {ex.label} …')}")
        progress = s.progress()
        verdict = s.test_and_record(ex, progress, args.timeout)
        print_verdict(s, ex, verdict, progress, watching=not args.once)
        any_failed = any_failed or not verdict.passed

    # 从后台启动的进程会继承“忽略 SIGINT”：这里明确装上默认处理，保证 Ctrl-C 总能退出
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        seen = mtimes()
        if not args.once:
            print(bold(f"👀 正在监视 {show_path(s.workspace.folder)}/ —— 保存文件就自动评测。按 Ctrl-C 退出。"))
            print(dim(f"   start、hint 这些命令请在另一个终端里运行（{s.cmd} start N）。"))
        if not seen:
            print(f"工作区还是空的。先挑一道题：{cyan(f'{s.cmd} start 1')}")
        # 先评测上次评测之后又改过的文件（包括 watch 没开着时改的）
        progress = s.progress()
        pending = [ex for ex, m in seen.items() if progress.peek(ex).get("tested_mtime_ns") != m]
        for ex in pending:
            judge(ex)
        if args.once:
            if not pending:
                print("没有新的改动需要评测。")
            return 1 if any_failed else 0
        if not pending and seen:
            print_next(s, s.progress(), watching=True)
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


# ---------------------------------------------------------------------------
# 命令行
# ---------------------------------------------------------------------------


def seconds(text: str) -> float:
    """--timeout 的值：一个正数（秒）。"""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"要一个正数（秒），比如 --timeout 20，而不是「{text}」")
    return value


def with_session(func: Callable[[argparse.Namespace, Session], int]) -> Callable[[argparse.Namespace], int]:
    """命令在解析完参数之后才读清单（清单坏了也能看 -h）；文件读写失败也是一句中文。"""

    def call(args: argparse.Namespace) -> int:
        try:
            return func(args, Session())
        except OSError as e:
            raise UserError(f"文件操作失败：{e}") from None

    return call


def build_parser() -> cli.ArgumentParser:
    cmd = judge_command()
    parser = cli.ArgumentParser(
        prog=cmd,
        description="手写 mini-sglang · 练习评测器。不带命令：列出全部练习，并告诉你下一题做哪个。",
        epilog=(
            f"示例：\n  {cmd} start 3      开始第 3 题\n  {cmd} test 3       评测它\n"
            f"  {cmd} watch        保存就评测\n\n"
            "工作区 practice/workspace/ 和进度文件 practice/.progress.json 被 git 忽略，是你自己的；\n"
            "环境变量 JUDGE_HOME=某个目录 可以把它们放到别处。\n"
            f"你的代码在单独的子进程里评测，每道题有时间限制（一般 {DEFAULT_TIME_LIMIT} 秒 CPU 时间，只算你的代码，--timeout 可改）；\n"
            "死循环、崩溃、语法错误都会变成一句中文结论。"
        ),
    )
    parser.set_defaults(func=with_session(cmd_overview))
    sub = parser.add_subparsers(title="命令", dest="command", metavar="命令")

    def command(name: str, func: Callable[[argparse.Namespace, Session], int], help: str,
                exercise: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        if exercise:
            p.add_argument("exercise", metavar="N", help="练习编号（3、003 或 req_lengths 都行）")
        p.set_defaults(func=with_session(func))
        return p

    command("list", cmd_list, "列出全部练习和完成情况")
    p = command("start", cmd_start, "把第 N 题的 starter 复制到工作区，开始做", exercise=True)
    p.add_argument("--force", action="store_true", help="工作区里已有这道题时也重新复制（旧文件备份成 .bak）")
    p = command("test", cmd_test, "评测你在工作区里写的第 N 题", exercise=True)
    p.add_argument("--timeout", type=seconds, metavar="SEC", help="这次评测的时间限制（默认用这道题自己的）")
    command("hint", cmd_hint, "看第 N 题的下一条提示（每次多给一条）", exercise=True)
    command("show", cmd_show, "看第 N 题的题目（不含提示）", exercise=True)
    p = command("solution", cmd_solution, "看参考答案（至少评测过一次之后）", exercise=True)
    p.add_argument("--force", action="store_true", help="还没评测过也要看")
    p = command("watch", cmd_watch, "开着它，保存文件就自动评测（Ctrl-C 退出）")
    p.add_argument("--once", action="store_true", help="只评测一轮已有的改动就退出")
    p.add_argument("--timeout", type=seconds, metavar="SEC", help="每次评测的时间限制（默认用各题自己的）")
    command("progress", cmd_progress, "看学习进度")
    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    Color.setup()
    return cli.dispatch(build_parser(), argv)


if __name__ == "__main__":
    cli.run(main)
