"""练习与评测器的检查。

1. 出题检查（authoring check）：清单里的每道题，四个文件都在；starter 判“未通过”，solution 判“通过”；
   标了 stdlib_only 的题真的只用标准库；problem.md 至少有一条提示。
2. 评测器 practice/judge.py 的命令行行为：全部通过子进程调用，JUDGE_HOME 指向 tmp_path，
   不碰真正的工作区和进度文件。
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRACTICE = ROOT / "practice"
JUDGE = PRACTICE / "judge.py"


def _load_judge():
    spec = importlib.util.spec_from_file_location("practice_judge", JUDGE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["practice_judge"] = module
    spec.loader.exec_module(module)
    return module


judge = _load_judge()
EXERCISES = judge.load_exercises()


# ---------------------------------------------------------------------------
# 出题检查
# ---------------------------------------------------------------------------


def test_manifest_is_in_book_order():
    assert len(EXERCISES) >= 2
    assert [ex.number for ex in EXERCISES] == list(range(1, len(EXERCISES) + 1))
    chapters = [ex.chapter for ex in EXERCISES]
    assert chapters == sorted(chapters), "练习要按书的章节顺序排"
    known = judge.chapter_titles()
    assert known, "读不到 chapters/manifest.toml"
    for ex in EXERCISES:
        assert ex.chapter in known, f"{ex.name} 的章节 {ex.chapter} 不在 chapters/manifest.toml 里"
    assert any(ex.stdlib_only for ex in EXERCISES), "至少要有一道只用标准库的题（网页上要用）"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_starter_fails_and_solution_passes(ex):
    starter = judge.run_test(ex, ex.file("starter.py"), timeout=60)
    assert starter.kind == "failed", (
        f"{ex.name} 的 starter 应该判“未通过”，实际是 {starter.kind}："
        f"{starter.message}\n{starter.detail}"
    )
    solution = judge.run_test(ex, ex.file("solution.py"), timeout=60)
    assert solution.kind == "passed", (
        f"{ex.name} 的 solution 应该判“通过”，实际是 {solution.kind}："
        f"{solution.message}\n{solution.detail}"
    )


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_deleting_everything_does_not_pass(ex, tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text('"""什么都没写。"""\n', encoding="utf-8")
    verdict = judge.run_test(ex, empty, timeout=60)
    assert verdict.kind == "failed", verdict
    assert "找不到" in verdict.message


def _imported_top_level_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("ex", [ex for ex in EXERCISES if ex.stdlib_only], ids=lambda ex: ex.name)
def test_stdlib_only_exercises_import_only_the_standard_library(ex):
    allowed = set(sys.stdlib_module_names) | {"judgekit"}
    for name in ("starter.py", "solution.py", "test.py"):
        extra = _imported_top_level_modules(ex.file(name)) - allowed
        assert not extra, f"{ex.name}/{name} 标了 stdlib_only，却导入了 {sorted(extra)}"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_problem_statement_has_chapter_difficulty_and_hints(ex):
    text = ex.file("problem.md").read_text(encoding="utf-8")
    statement, hints = judge.split_problem(text)
    assert f"第 {ex.chapter} 章" in statement
    assert ex.difficulty in statement
    assert hints, f"{ex.name}/problem.md 至少要有一节“## 提示”"
    assert all(body for _, body in hints)
    assert "提示" not in "".join(line for line in statement.splitlines() if line.startswith("#"))


def test_mini_toml_reads_the_manifest_like_tomllib():
    import tomllib

    text = (PRACTICE / "exercises.toml").read_text(encoding="utf-8")
    assert judge._mini_toml(text) == tomllib.loads(text)


# ---------------------------------------------------------------------------
# 命令行
# ---------------------------------------------------------------------------


def run_cli(*args: str, home: Path, judge_path: Path = JUDGE, timeout: float = 60):
    env = dict(os.environ, JUDGE_HOME=str(home), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, str(judge_path), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def workspace(home: Path, ex) -> Path:
    return home / "workspace" / f"{ex.name}.py"


def progress_of(home: Path) -> dict:
    return json.loads((home / ".progress.json").read_text(encoding="utf-8"))["exercises"]


FIRST = EXERCISES[0]  # 什么都还没做时，“下一题”就是第 1 题
# 下面的命令行测试用“请求的长度记账”：只用标准库、评测很快，starter 是 raise NotImplementedError，
# 几个测试还按它的类名 ReqState 写了坏文件。按 slug 找，编号随清单变。
CLI = next(ex for ex in EXERCISES if ex.slug == "req_lengths")
N = str(CLI.number)


def test_list_and_bare_invocation(tmp_path):
    r = run_cli("list", home=tmp_path)
    assert r.returncode == 0, r.stderr
    for ex in EXERCISES:
        assert ex.code in r.stdout and ex.title in r.stdout
    assert f"已完成 0/{len(EXERCISES)}" in r.stdout
    assert "\033[" not in r.stdout  # 不是终端就不上色

    r = run_cli(home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"已完成 0/{len(EXERCISES)}" in r.stdout
    assert f"下一题：{FIRST.label}" in r.stdout and f"start {FIRST.number}" in r.stdout


def test_start_copies_the_starter_and_refuses_to_overwrite(tmp_path):
    r = run_cli("start", N, home=tmp_path)
    assert r.returncode == 0, r.stderr
    target = workspace(tmp_path, CLI)
    assert target.read_text(encoding="utf-8") == CLI.file("starter.py").read_text(
        encoding="utf-8"
    )
    assert target.name in r.stdout

    target.write_text("# 我写了一半的代码\n", encoding="utf-8")
    r = run_cli("start", N, home=tmp_path)
    assert r.returncode == 1
    assert "不会覆盖" in r.stdout and "--force" in r.stdout
    assert target.read_text(encoding="utf-8") == "# 我写了一半的代码\n"

    r = run_cli("start", N, "--force", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert target.read_text(encoding="utf-8") == CLI.file("starter.py").read_text(
        encoding="utf-8"
    )
    assert (
        target.with_name(target.name + ".bak").read_text(encoding="utf-8") == "# 我写了一半的代码\n"
    )


def test_test_reports_not_started_then_failed_then_passed_and_records_progress(tmp_path):
    r = run_cli("test", N, home=tmp_path)
    assert r.returncode == 1
    assert "还没开始" in r.stdout and f"start {N}" in r.stdout
    assert not (tmp_path / ".progress.json").exists()

    run_cli("start", N, home=tmp_path)
    r = run_cli("test", N, home=tmp_path)
    assert r.returncode == 1
    assert "未通过" in r.stdout and "NotImplementedError" in r.stdout
    assert progress_of(tmp_path)[CLI.slug]["status"] == "failed"

    shutil.copyfile(CLI.file("solution.py"), workspace(tmp_path, CLI))
    r = run_cli("test", N, home=tmp_path)
    assert r.returncode == 0, r.stdout
    assert "通过" in r.stdout and "未通过" not in r.stdout
    entry = progress_of(tmp_path)[CLI.slug]
    assert entry["status"] == "passed" and entry["attempts"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".progress.json",
        "workspace",
    ]  # 没有残留的临时文件

    r = run_cli("list", home=tmp_path)
    assert f"已完成 1/{len(EXERCISES)}" in r.stdout and "✅" in r.stdout
    r = run_cli("progress", home=tmp_path)
    assert (
        r.returncode == 0 and f"已完成 1/{len(EXERCISES)}" in r.stdout and "评测 2 次" in r.stdout
    )


def test_infinite_loop_is_a_timeout(tmp_path):
    target = workspace(tmp_path, CLI)
    target.parent.mkdir(parents=True)
    target.write_text(
        "class ReqState:\n    def __init__(self, *args):\n        while True:\n            pass\n"
    )
    start = time.monotonic()
    r = run_cli("test", N, "--timeout", "3", home=tmp_path)
    elapsed = time.monotonic() - start
    assert r.returncode == 1
    assert "超时" in r.stdout and "3 秒" in r.stdout
    assert elapsed < 15, f"超时应在 3 秒左右判出，实际用了 {elapsed:.1f} 秒"
    assert progress_of(tmp_path)[CLI.slug]["last_verdict"] == "timeout"


def test_syntax_error_reports_file_and_line(tmp_path):
    target = workspace(tmp_path, CLI)
    target.parent.mkdir(parents=True)
    target.write_text("class ReqState:\n    def __init__(self, a, b, c)\n        pass\n")
    r = run_cli("test", N, home=tmp_path)
    assert r.returncode == 1
    assert "语法错误" in r.stdout and target.name in r.stdout and "第 2 行" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_runtime_crash_shows_the_end_of_the_traceback(tmp_path):
    target = workspace(tmp_path, CLI)
    target.parent.mkdir(parents=True)
    target.write_text("print('调试输出')\nx = [][0]\n")
    r = run_cli("test", N, home=tmp_path)
    assert r.returncode == 1
    assert "运行时崩溃" in r.stdout and "IndexError" in r.stdout and "line 2" in r.stdout
    assert "调试输出" in r.stdout  # 学习者自己打印的东西也给他看


@pytest.mark.parametrize(
    "args, words",
    [
        (["test", "99"], "没有第 99 题"),
        (["start", "abc"], "不是练习编号"),
        (["hint"], "需要一个练习编号"),
        (["frobnicate"], "不认识的命令"),
        (["test", "1", "--timeout", "soon"], "--timeout"),
        (["list", "--force"], "不认识选项"),
    ],
)
def test_bad_input_is_one_chinese_line_and_exit_2(tmp_path, args, words):
    r = run_cli(*args, home=tmp_path)
    assert r.returncode == 2
    assert words in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr + r.stdout


def test_manifest_entry_without_folder_is_exit_2(tmp_path):
    copy = tmp_path / "practice"
    shutil.copytree(
        PRACTICE, copy, ignore=shutil.ignore_patterns("workspace", ".progress.json", "__pycache__")
    )
    with open(copy / "exercises.toml", "a", encoding="utf-8") as f:
        n = len(EXERCISES) + 1
        f.write(
            f'\n[[exercise]]\nnumber = {n}\nslug = "ghost"\ntitle = "不存在的题"\n'
            f'chapter = 1\ndifficulty = "简单"\nstdlib_only = true\n'
        )
    r = run_cli("list", home=tmp_path / "home", judge_path=copy / "judge.py")
    assert r.returncode == 2
    assert f"{n:03d}_ghost" in r.stderr and "不存在" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_hint_reveals_one_more_each_time(tmp_path):
    _, hints = judge.split_problem(CLI.file("problem.md").read_text(encoding="utf-8"))
    assert len(hints) >= 2
    first, second = hints[0][0], hints[1][0]

    r = run_cli("hint", N, home=tmp_path)
    assert r.returncode == 0
    assert first in r.stdout and second not in r.stdout
    assert f"1/{len(hints)}" in r.stdout

    r = run_cli("hint", N, home=tmp_path)
    assert second in r.stdout and f"2/{len(hints)}" in r.stdout
    assert progress_of(tmp_path)[CLI.slug]["hints"] == 2

    for _ in range(len(hints)):  # 给完之后再要：全部再显示一遍，并指向答案
        r = run_cli("hint", N, home=tmp_path)
    assert "全部给出" in r.stdout and f"solution {N}" in r.stdout


def test_show_hides_hints(tmp_path):
    r = run_cli("show", N, home=tmp_path)
    assert r.returncode == 0
    assert CLI.title in r.stdout
    _, hints = judge.split_problem(CLI.file("problem.md").read_text(encoding="utf-8"))
    assert hints[0][1].splitlines()[0] not in r.stdout


def test_solution_needs_an_attempt_or_force(tmp_path):
    solution_text = CLI.file("solution.py").read_text(encoding="utf-8")
    r = run_cli("solution", N, home=tmp_path)
    assert r.returncode == 1 and "先自己试一次" in r.stdout
    assert solution_text not in r.stdout

    r = run_cli("solution", N, "--force", home=tmp_path)
    assert r.returncode == 0 and solution_text.rstrip() in r.stdout

    run_cli("start", N, home=tmp_path)
    run_cli("test", N, home=tmp_path)
    r = run_cli("solution", N, home=tmp_path)
    assert r.returncode == 0 and solution_text.rstrip() in r.stdout


def test_watch_once_tests_the_changed_file(tmp_path):
    r = run_cli("watch", "--once", home=tmp_path)
    assert r.returncode == 0 and "工作区还是空的" in r.stdout

    run_cli("start", N, home=tmp_path)
    shutil.copyfile(CLI.file("solution.py"), workspace(tmp_path, CLI))
    r = run_cli("watch", "--once", home=tmp_path)
    assert r.returncode == 0, r.stdout
    assert "通过" in r.stdout and CLI.title in r.stdout

    r = run_cli("watch", "--once", home=tmp_path)  # 没再改过：不重复评测
    assert "没有新的改动" in r.stdout


def test_watch_exits_cleanly_on_ctrl_c(tmp_path):
    import signal

    env = dict(os.environ, JUDGE_HOME=str(tmp_path), NO_COLOR="1")
    proc = subprocess.Popen(
        [sys.executable, str(JUDGE), "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=env,
    )
    try:
        time.sleep(1.5)  # 让它启动并进入轮询
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "再见" in out and "Traceback" not in err


def test_a_broken_progress_file_is_set_aside_not_a_crash(tmp_path):
    (tmp_path / ".progress.json").write_text("{ 这不是 JSON", encoding="utf-8")
    r = run_cli("hint", N, home=tmp_path)
    assert r.returncode == 0
    assert "读不出来" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / ".progress.json.broken").read_text(encoding="utf-8") == "{ 这不是 JSON"
    assert progress_of(tmp_path)[CLI.slug]["hints"] == 1
