"""minibook.cli：书的命令行工具共用的约定（中文的 argparse、一行错误、退出码、进度）。"""

import argparse
import gettext
import io
import os
import time

import pytest

from minibook import cli


def test_committed_mo_is_compiled_from_the_po():
    """改了 .po 忘了重新生成 .mo，这里失败（python -m minibook.cli compile）。"""
    catalog = cli.read_po()
    assert cli.MO_FILE.read_bytes() == cli.mo_bytes(catalog)
    with open(cli.MO_FILE, "rb") as f:
        mo = gettext.GNUTranslations(f)
    assert mo.gettext("usage: ") == "用法："
    assert mo.ngettext("expected %s argument", "expected %s arguments", 3) == "后面要跟 %s 个值"


def test_every_argparse_message_of_this_python_is_translated():
    catalog = cli.read_po()
    messages = cli.argparse_messages()
    assert "the following arguments are required: %s" in messages  # 提取本身没坏
    missing = [m for m in messages if not catalog.get(m)]
    assert not missing, f"argparse 里这些提示语还没有译文（补进 {cli.PO_FILE.name}）：{missing}"


def parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(prog="tool.py", description="一个工具")
    sub = p.add_subparsers(title="命令", dest="command", metavar="命令", required=True)
    q = sub.add_parser("test", help="判一题")
    q.add_argument("n", type=int, help="题号")
    q.add_argument("--limit", help="时间限制")
    q.set_defaults(func=lambda args: 0 if args.n > 0 else 1)
    return p


@pytest.mark.parametrize("argv, message", [
    ([], "缺少参数：命令"),
    (["nope"], "没有 'nope' 这一项"),
    (["test"], "缺少参数：n"),
    (["test", "x"], "参数 n：'x' 不是合法的 int 值"),
    (["test", "1", "--limit"], "参数 --limit：后面要跟一个值"),
    (["test", "1", "extra"], "多余的参数：extra"),
])
def test_argparse_errors_come_out_in_chinese(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("用法：tool.py")
    assert message in err and "-h 查看帮助" in err
    assert "usage" not in err and "error" not in err and "argument" not in err


def test_help_is_chinese(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["-h"])
    out = capsys.readouterr().out
    assert out.startswith("用法：tool.py") and "显示这份帮助并退出" in out and "判一题" in out
    assert "show this help" not in out and "options" not in out


def test_translation_is_switched_on_only_while_argparse_works(monkeypatch):
    monkeypatch.setenv("LANGUAGE", "fr")
    domain = gettext.textdomain()
    parser().format_help()
    assert os.environ["LANGUAGE"] == "fr" and gettext.textdomain() == domain  # 不影响别的库、不传给子进程
    assert argparse.ArgumentParser(prog="x").format_usage().startswith("usage:")  # 普通的 argparse 不受影响
    monkeypatch.delenv("LANGUAGE")
    parser().format_help()
    assert "LANGUAGE" not in os.environ


def test_dispatch_turns_user_errors_into_one_line(capsys):
    def broken(args):
        raise cli.UserError("没有第 9 题")

    assert cli.dispatch(parser(), ["test", "2"]) == 0  # 子命令的返回值就是退出码
    assert cli.dispatch(parser(), ["test", "0"]) == 1

    q = cli.ArgumentParser(prog="t")
    q.set_defaults(func=broken)
    assert cli.dispatch(q, []) == 2
    assert capsys.readouterr().err == "错误：没有第 9 题\n"


def test_run_exits_with_the_code_and_handles_ctrl_c(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.run(lambda argv: 3, [])
    assert exit_info.value.code == 3

    def interrupted(argv):
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_info:
        cli.run(interrupted, [])
    assert exit_info.value.code == 130 and "已中断" in capsys.readouterr().err


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_refreshes_one_line_and_erases_it():
    stream = FakeTerminal()
    with cli.progress("main：python x.py", stream=stream, tick=0.05):
        time.sleep(0.3)
    text = stream.getvalue()
    assert "\rmain：python x.py … 0 秒" in text.replace("\033[K", "")
    assert "\n" not in text and text.endswith("\r\033[K")  # 结束时擦掉，结果由调用者打印


def test_progress_off_a_terminal_prints_rarely():
    quick = io.StringIO()
    with cli.progress("测试", stream=quick, every=60, tick=0.05):
        time.sleep(0.2)
    assert quick.getvalue() == ""  # 短步骤一行也不打
    slow = io.StringIO()
    with cli.progress("测试", stream=slow, every=0.3, tick=0.05):
        time.sleep(1.0)
    lines = slow.getvalue().splitlines()
    assert 1 <= len(lines) <= 4 and all(line.startswith("测试 … 仍在运行（已 ") for line in lines)
    assert "\r" not in slow.getvalue()


def test_display_width_counts_cjk_as_two_columns():
    assert cli.display_width("KV 池") == 5
    assert cli.ljust("注意力", 8) == "注意力  " and cli.ljust("abc", 8) == "abc     "
    assert cli.format_seconds(75) == "1 分 15 秒" and cli.format_seconds(9.9) == "9 秒"


def test_every_book_tool_speaks_chinese_on_a_bad_command():
    """书里每个命令行工具（包括 README 里的 python -m minibook.models）写错时都是中文、退出码 2。"""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    tools = [[sys.executable, "-m", "minibook.models", "bogus"],
             [sys.executable, str(repo / "tools" / "steps.py"), "bogus"],
             [sys.executable, str(repo / "tools" / "notebook.py"), "--bogus"],
             [sys.executable, str(repo / "practice" / "judge.py"), "bogus"],
             [sys.executable, str(repo / "practice" / "projects" / "accept.py"), "bogus"]]
    for argv in tools:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=repo, timeout=120)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "错误" in proc.stderr and "usage" not in proc.stderr and "error:" not in proc.stderr, proc.stderr


def test_notebook_without_a_chapter_refuses_to_rewrite_everything():
    """不写章号就执行会重写全部提交过的 .ipynb：要明说 all。"""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(repo / "tools" / "notebook.py")], capture_output=True,
                          text=True, cwd=repo, timeout=120)
    assert proc.returncode == 2 and "all" in proc.stderr, proc.stderr
