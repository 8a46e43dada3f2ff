"""练习与评测器的检查。

1. 出题检查（authoring check）：清单里的每道题，四个文件都在；starter 判“未通过”，solution 在这道题
   自己的时间限制内判“通过”；标了 stdlib_only 的题真的只用标准库；problem.md 至少有一条提示；
   starter 的文档字符串不提 judge.py（网页的编辑框里也显示它）。
2. 评测的库 minibook.judging：清单字段、时间限制、“下一题”。
3. 评测器 practice/judge.py 的命令行行为：全部通过子进程调用，JUDGE_HOME 指向 tmp_path，
   不碰真正的工作区和进度文件。
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibook import judging

ROOT = Path(__file__).resolve().parents[1]
PRACTICE = ROOT / "practice"
JUDGE = PRACTICE / "judge.py"
EXERCISES = judging.load_exercises()


# ---------------------------------------------------------------------------
# 出题检查
# ---------------------------------------------------------------------------


def test_manifest_is_in_book_order():
    assert len(EXERCISES) >= 2
    assert [ex.number for ex in EXERCISES] == list(range(1, len(EXERCISES) + 1))
    chapters = [ex.chapter for ex in EXERCISES]
    assert chapters == sorted(chapters), "练习要按书的章节顺序排"
    known = judging.chapter_titles()
    assert known, "读不到 chapters/manifest.toml"
    for ex in EXERCISES:
        assert ex.chapter in known, f"{ex.name} 的章节 {ex.chapter} 不在 chapters/manifest.toml 里"
    assert any(ex.stdlib_only for ex in EXERCISES), "至少要有一道只用标准库的题（网页上要用）"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_starter_fails_and_solution_passes(ex):
    starter = judging.run_test(ex, ex.file("starter.py"))
    assert starter.kind == "failed", (
        f"{ex.name} 的 starter 应该判“未通过”，实际是 {starter.kind}："
        f"{starter.message}\n{starter.detail}"
    )
    # 用这道题自己的时间限制（学习者拿到的就是它）：参考答案在限制内跑完，限制才算定得对
    solution = judging.run_test(ex, ex.file("solution.py"))
    assert solution.kind == "passed", (
        f"{ex.name} 的 solution 应该在 {ex.time_limit:g} 秒内判“通过”，实际是 {solution.kind}"
        f"（{solution.seconds:.1f} 秒）：{solution.message}\n{solution.detail}"
    )


def test_every_test_goes_through_judgekit_main():
    """时间限制从 judgekit.main() 开始评测时算起（见 judging.run_test）：每个 test.py 都得经过它。"""
    for ex in EXERCISES:
        tree = ast.parse(ex.file("test.py").read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "judgekit"
                    for a in n.names}
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "main" in imported and "main" in calls, f"{ex.name}/test.py 要用 judgekit.main(run) 评测"


def test_starter_docstrings_work_in_the_browser_editor_too():
    """网页的编辑框里显示的就是 starter：文档字符串不能叫人去运行 judge.py。"""
    for ex in EXERCISES:
        doc = ast.get_docstring(ast.parse(ex.file("starter.py").read_text(encoding="utf-8"))) or ""
        assert doc.startswith(f"练习 {ex.code} · {ex.title}"), ex.name
        assert "judge.py" not in doc and "problem.md" not in doc, f"{ex.name}/starter.py 的文档字符串：{doc}"


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_deleting_everything_does_not_pass(ex, tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text('"""什么都没写。"""\n', encoding="utf-8")
    verdict = judging.run_test(ex, empty)
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
    assert not text.startswith("# 练习"), f"{ex.name}/problem.md 的开头（标题、章节、难度）由清单生成，不要再写"
    statement, hints = judging.read_problem(ex)
    assert statement.startswith(f"# 练习 {ex.code} · {ex.title}\n")
    assert f"第 {ex.chapter} 章" in statement
    assert ex.difficulty in statement
    assert hints, f"{ex.name}/problem.md 至少要有一节“## 提示”"
    assert all(body for _, body in hints)
    assert "提示" not in "".join(line for line in statement.splitlines() if line.startswith("#"))


# ---------------------------------------------------------------------------
# 库：清单字段、时间限制、下一题
# ---------------------------------------------------------------------------


def copy_practice(dest: Path, extra_toml: str = "", edit=None) -> Path:
    """把 practice/ 拷一份（不带工作区和进度），可以改清单；返回拷贝里的 judge.py。"""
    shutil.copytree(PRACTICE, dest, ignore=shutil.ignore_patterns("workspace", ".progress.json", "__pycache__"))
    manifest = dest / "exercises.toml"
    text = manifest.read_text(encoding="utf-8")
    if edit:
        text = edit(text)
    manifest.write_text(text + extra_toml, encoding="utf-8")
    return dest / "judge.py"


def test_default_time_limit_fits_the_exercises():
    """默认限制是几秒，不是一分钟；参考答案最慢的一道在这台机器上也只用了它的一小部分（见上面的出题检查）。"""
    assert 5 <= judging.DEFAULT_TIME_LIMIT <= 15


def _with_limit(slug: str, value: str):
    def edit(text: str) -> str:
        head = f'slug = "{slug}"\n'
        assert head in text
        return text.replace(head, head + f"time_limit = {value}\n")
    return edit


def test_an_exercise_can_ask_for_more_time(tmp_path):
    judge = copy_practice(tmp_path / "practice", edit=_with_limit("req_lengths", "25"))
    exercises = judging.load_exercises(judge.parent / "exercises.toml")
    limits = {ex.slug: ex.time_limit for ex in exercises}
    assert limits.pop("req_lengths") == 25
    assert set(limits.values()) == {judging.DEFAULT_TIME_LIMIT}


@pytest.mark.parametrize("value", ["0", "-3", '"long"', "true"])
def test_a_bad_time_limit_is_a_user_error(tmp_path, value):
    judge = copy_practice(tmp_path / "practice", edit=_with_limit("req_lengths", value))
    with pytest.raises(judging.UserError, match="time_limit"):
        judging.load_exercises(judge.parent / "exercises.toml")


def _with_field(slug: str, line: str):
    def edit(text: str) -> str:
        head = f'slug = "{slug}"\n'
        assert head in text
        return text.replace(head, head + line + "\n")
    return edit


@pytest.mark.parametrize("slug,value", [("req_lengths", '"浏览器里没有它"'),  # 只给 stdlib_only = false 的题
                                        ("causal_attention", "3")])
def test_a_bad_local_only_reason_is_a_user_error(tmp_path, slug, value):
    judge = copy_practice(tmp_path / "practice", edit=_with_field(slug, f"local_only_reason = {value}"))
    with pytest.raises(judging.UserError, match="local_only_reason"):
        judging.load_exercises(judge.parent / "exercises.toml")


def _slow_to_start(tmp_path: Path, seconds: float, limit: str, slug: str = ""):
    """practice/ 的拷贝：一道题（默认 req_lengths）的 test.py 在开始评测之前先睡 seconds 秒（像冷启动时 import torch）。"""
    ex = next(ex for ex in EXERCISES if ex.slug == (slug or CLI.slug))
    judge = copy_practice(tmp_path / "practice", edit=_with_limit(ex.slug, limit))
    test = judge.parent / ex.name / "test.py"
    text = test.read_text(encoding="utf-8")
    main = 'if __name__ == "__main__":'
    assert text.count(main) == 1
    test.write_text(text.replace(main, f"import time\ntime.sleep({seconds})\n\n{main}"), encoding="utf-8")
    return next(e for e in judging.load_exercises(judge.parent / "exercises.toml") if e.slug == ex.slug)


TORCH_EXERCISE = next(ex for ex in EXERCISES if ex.slug == "causal_attention")


@pytest.mark.parametrize("warm", ["1", "0"])
def test_torch_exercises_judge_the_same_with_and_without_the_warm_template(warm, monkeypatch, tmp_path):
    """要 torch 的题从预热模板（practice/warm.py）fork；JUDGE_WARM=0 时照旧新起解释器：结论一样，
    学习者的进程里照样没有评测的环境变量、__main__ 不是 test.py、当前目录是临时目录。"""
    monkeypatch.setenv("JUDGE_WARM", warm)
    ex = TORCH_EXERCISE
    assert judging.run_test(ex, ex.file("solution.py")).kind == "passed"
    assert judging.run_test(ex, ex.file("starter.py")).kind == "failed"
    peek = tmp_path / "peek.py"
    peek.write_text(ex.file("solution.py").read_text(encoding="utf-8") + (
        "\nimport os, sys\n"
        "assert not [k for k in os.environ if k.startswith('JUDGE')], sorted(os.environ)\n"
        "assert not hasattr(sys.modules['__main__'], '__file__')\n"
        "assert 'learner-' in os.getcwd(), os.getcwd()\n"), encoding="utf-8")
    verdict = judging.run_test(ex, peek)
    assert verdict.kind == "passed", (verdict.message, verdict.detail)


FENCE_PROBE = """
import errno, os

def _read(path):
    with builtins_open(path, "rb") as f:
        return f.read(4096)

builtins_open = __builtins__["open"] if isinstance(__builtins__, dict) else __builtins__.open
me, group = os.getpid(), os.getpgid(0)
peers = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != me
         and int(_read(f"/proc/{n}/stat").decode().rsplit(")", 1)[1].split()[2]) == group]
assert peers, "进程组里应当有评测进程"
for pid in peers:
    for name in ("maps", "environ", "mem"):
        try:
            _read(f"/proc/{pid}/{name}")
        except PermissionError:
            continue
        raise AssertionError(f"读到了评测进程的 /proc/{pid}/{name}")
for target in (CANARY, os.path.join(os.path.dirname(CANARY), "new.txt")):
    try:
        with builtins_open(target, "w") as f:
            f.write("改掉了")
    except OSError as e:
        assert e.errno == errno.EROFS, e
    else:
        raise AssertionError(f"写进了 {target}")
with builtins_open("scratch.txt", "w") as f:  # 自己的工作目录可以写
    f.write("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="围栏用的是 Linux 的命名空间和 capabilities")
@pytest.mark.parametrize("warm", ["1", "0"])
def test_the_learners_process_is_fenced_in(warm, monkeypatch, tmp_path):
    """学习者的进程（不论从预热模板 fork 还是新起）读不了 test.py 进程的内存、环境变量和内存映射，
    写不了磁盘上的任何文件，只有自己的工作目录可写；这台机器上围栏是搭好了的（Verdict.fence 为空）。"""
    monkeypatch.setenv("JUDGE_WARM", warm)
    ex = TORCH_EXERCISE
    canary = tmp_path / "canary.txt"
    canary.write_text("原样", encoding="utf-8")
    probe = tmp_path / "probe.py"
    probe.write_text(ex.file("solution.py").read_text(encoding="utf-8")
                     + f"\nCANARY = {str(canary)!r}\n" + FENCE_PROBE, encoding="utf-8")
    # 静态检查拦不住 __builtins__["open"] 这种写法：真正挡住它的是围栏
    verdict = judging.run_test(ex, probe)
    assert verdict.kind == "passed" and verdict.fence == "", (verdict.kind, verdict.message, verdict.detail)
    assert canary.read_text(encoding="utf-8") == "原样" and not (tmp_path / "new.txt").exists()


def test_a_tensor_handed_back_and_returned_again_is_not_a_crash(tmp_path):
    """评测把学习者上一次返回的张量再交给它，它原样返回（merge_states 只有一块时返回 outputs[0]）：
    学习者那边的原件早被回收、“放掉”的消息已经发出，这个张量按原名重建；曾经判成“对面提到了一个
    不存在的张量”的崩溃。换几个种子，每次都要判“通过”。"""
    ex = next(ex for ex in EXERCISES if ex.slug == "merge_attention_states")
    head = "    if not outputs or len(outputs) != len(lses):\n"
    text = ex.file("solution.py").read_text(encoding="utf-8")
    assert text.count(head) == 1
    answer = tmp_path / "k1.py"
    answer.write_text(text.replace(head, "    if len(outputs) == 1 and len(lses) == 1 and outputs[0].dim() == 3 \\\n"
                                         "            and lses[0].shape == outputs[0].shape[:2]:\n"
                                         "        return outputs[0], lses[0]\n" + head), encoding="utf-8")
    for seed in (1, 2, 3):
        verdict = judging.run_test(ex, answer, seed=seed)
        assert verdict.kind == "passed", (seed, verdict.message, verdict.detail)


def test_a_passing_verdict_from_a_test_process_that_died_does_not_count(tmp_path):
    """结论文件写着“通过”、口令也对，可评测进程不是以 0 退出的（被杀了）：判“崩溃”。
    学习者的代码要是能写出这样一份结论再杀掉评测进程（围栏搭不上的机器上），也就只到这一步。"""
    judge = copy_practice(tmp_path / "practice")
    ex = next(e for e in judging.load_exercises(judge.parent / "exercises.toml") if e.slug == "type_tags")
    assert not judging._uses_torch(ex)  # 新起的解释器：sys.exit 之后 atexit 才会运行
    test = ex.file("test.py")
    future = "from __future__ import annotations\n"
    text = test.read_text(encoding="utf-8")
    assert future in text
    test.write_text(text.replace(future, future + "import atexit, os\n"
                                 "atexit.register(lambda: os.kill(os.getpid(), 9))\n", 1), encoding="utf-8")
    verdict = judging.run_test(ex, ex.file("solution.py"))
    assert verdict.kind == "crash" and "没有正常结束" in verdict.message and "-9" in verdict.message, verdict


def test_the_time_limit_counts_the_learners_code_not_test_imports(tmp_path):
    # config_shapes 的参考答案在学习者进程里只用约 0.15 秒 CPU，离 2 秒限制的上限（6 秒）很远。
    # req_lengths 不行：它的几万次跨进程调用要 5–6 秒 CPU，2 秒的限制下有没有通过看机器。
    ex = _slow_to_start(tmp_path, 3, "2", slug="config_shapes")
    verdict = judging.run_test(ex, ex.file("solution.py"))
    assert verdict.kind == "passed", verdict  # 3 秒的“import”不算进 2 秒的限制（限制只卡学习者子进程的 CPU 时间）
    loop = tmp_path / "loop.py"
    loop.write_text("while True:\n    pass\n")
    start = time.monotonic()
    verdict = judging.run_test(ex, loop)
    assert verdict.kind == "timeout" and verdict.limit == 2
    # 3 秒准备 + 子进程的 CPU 时间上限（2 × 2 + 2 秒，见 judgekit.Child）；机器忙时墙钟更长
    assert 5 <= time.monotonic() - start < 30


def test_a_test_that_never_starts_is_a_crash_not_a_hang(tmp_path, monkeypatch):
    ex = _slow_to_start(tmp_path, 30, "2")
    monkeypatch.setattr(judging, "STARTUP_LIMIT", 1)
    start = time.monotonic()
    verdict = judging.run_test(ex, ex.file("solution.py"))
    assert verdict.kind == "crash" and "没能开始" in verdict.message and "不是你的代码" in verdict.message
    assert time.monotonic() - start < 10


def test_next_exercise_is_the_first_unsolved_after_the_last_worked_on(tmp_path):
    progress = judging.Progress(tmp_path / ".progress.json")
    first, third, fifth, last = EXERCISES[0], EXERCISES[2], EXERCISES[4], EXERCISES[-1]
    assert progress.next_exercise(EXERCISES) is first  # 什么都没做过：第一题
    progress.record_test(fifth, "passed", None)
    assert progress.next_exercise(EXERCISES) is EXERCISES[5]  # 不是回到第一题
    progress.record_test(third, "failed", None)
    assert progress.last_worked(EXERCISES) is third
    assert progress.next_exercise(EXERCISES) is EXERCISES[3]
    progress.record_test(EXERCISES[3], "passed", None)
    assert progress.next_exercise(EXERCISES) is EXERCISES[5]  # 跳过已经通过的第 5 题
    for ex in EXERCISES[5:]:
        progress.record_test(ex, "passed", None)
    assert progress.last_worked(EXERCISES) is last
    assert progress.next_exercise(EXERCISES) is first  # 后面都通过了：从头找
    reread = judging.Progress(tmp_path / ".progress.json")  # 存盘了
    assert reread.last_worked(EXERCISES) is last and reread.next_exercise(EXERCISES) is first


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
    after = EXERCISES[CLI.number]  # 下一题是它后面那道，不是第一题
    assert f"下一题：{after.label}" in r.stdout and f"start {after.number}" in r.stdout
    assert f"test {N}" not in r.stdout  # 通过了就不再叫人去评测它
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
    assert f"下一题：{after.label}" in r.stdout
    r = run_cli(home=tmp_path)
    assert f"下一题：{after.label}" in r.stdout and FIRST.label not in r.stdout.split("已完成")[-1]


def test_next_is_the_exercise_being_worked_on(tmp_path):
    later = EXERCISES[-1]
    run_cli("start", str(later.number), home=tmp_path)
    r = run_cli(home=tmp_path)
    assert f"接着做：{later.label}" in r.stdout and f"test {later.number}" in r.stdout
    run_cli("start", N, home=tmp_path)  # 换一道做：“接着做”跟着最近在做的那道走
    r = run_cli("progress", home=tmp_path)
    assert f"接着做：{CLI.label}" in r.stdout and f"test {N}" in r.stdout


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
    assert elapsed < 30, f"超时应在 8 秒 CPU 时间（2 × 3 + 2）左右判出，实际用了 {elapsed:.1f} 秒"
    assert "--timeout 6" in r.stdout
    assert progress_of(tmp_path)[CLI.slug]["last_verdict"] == "timeout"


def test_without_timeout_the_exercise_limit_applies(tmp_path):
    judge = copy_practice(tmp_path / "practice", edit=_with_limit(CLI.slug, "2"))
    home = tmp_path / "home"
    target = workspace(home, CLI)
    target.parent.mkdir(parents=True)
    target.write_text("while True:\n    pass\n")
    start = time.monotonic()
    r = run_cli("test", N, home=home, judge_path=judge)
    elapsed = time.monotonic() - start
    assert r.returncode == 1 and "超时" in r.stdout and "在 2 秒内" in r.stdout, r.stdout
    assert elapsed < 25, elapsed  # 子进程的 CPU 时间上限 2 × 2 + 2 秒


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
    ],
)
def test_bad_exercise_is_one_chinese_line_and_exit_2(tmp_path, args, words):
    r = run_cli(*args, home=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("错误：") and words in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr + r.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["hint"], "缺少参数：N"),
        (["frobnicate"], "没有 'frobnicate' 这一项"),
        (["test", "1", "--timeout", "soon"], "--timeout：要一个正数"),
        (["test", "1", "--timeout", "0"], "--timeout：要一个正数"),
        (["list", "--force"], "多余的参数：--force"),
    ],
)
def test_bad_command_line_is_usage_and_a_chinese_error(tmp_path, args, words):
    """命令写错：argparse 给出用法和一行中文错误（书里所有工具同一个约定，minibook.cli）。"""
    r = run_cli(*args, home=tmp_path)
    assert r.returncode == 2
    usage, error = r.stderr.strip().splitlines()
    assert usage.startswith("用法：") and "错误：" in error and words in error, r.stderr
    assert "Traceback" not in r.stderr + r.stdout and r.stdout == ""


def test_help_is_chinese_and_works_with_a_broken_manifest(tmp_path):
    judge = copy_practice(tmp_path / "practice", extra_toml="\n[[exercise]]\nnumber = 99\n")
    r = run_cli("-h", home=tmp_path, judge_path=judge)
    assert r.returncode == 0 and r.stdout.startswith("用法：")
    for command in ("list", "start", "test", "hint", "show", "solution", "watch", "progress"):
        assert command in r.stdout
    r = run_cli("list", home=tmp_path, judge_path=judge)
    assert r.returncode == 2 and "缺少字段 slug" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_manifest_entry_without_folder_is_exit_2(tmp_path):
    n = len(EXERCISES) + 1
    judge = copy_practice(
        tmp_path / "practice",
        extra_toml=f'\n[[exercise]]\nnumber = {n}\nslug = "ghost"\ntitle = "不存在的题"\n'
        f'chapter = 1\ndifficulty = "简单"\nstdlib_only = true\n',
    )
    r = run_cli("list", home=tmp_path / "home", judge_path=judge)
    assert r.returncode == 2
    assert f"{n:03d}_ghost" in r.stderr and "不存在" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_hint_reveals_one_more_each_time(tmp_path):
    _, hints = judging.split_problem(CLI.file("problem.md").read_text(encoding="utf-8"))
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
    _, hints = judging.split_problem(CLI.file("problem.md").read_text(encoding="utf-8"))
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
    r = run_cli("watch", "--once", home=tmp_path)  # 刚 start 的起始代码先不评
    assert r.returncode == 0 and "还是起始代码" in r.stdout and "未通过" not in r.stdout
    assert "last_verdict" not in progress_of(tmp_path).get(CLI.slug, {})

    shutil.copyfile(CLI.file("solution.py"), workspace(tmp_path, CLI))
    r = run_cli("watch", "--once", home=tmp_path)
    assert r.returncode == 0, r.stdout
    assert "通过" in r.stdout and CLI.title in r.stdout

    r = run_cli("watch", "--once", home=tmp_path)  # 没再改过：不重复评测
    assert "没有新的改动" in r.stdout


def test_watch_speaks_watch_mode_and_exits_cleanly_on_ctrl_c(tmp_path):
    """开着 watch：保存就评测，建议里不叫人去运行 test N（它自己会评）；Ctrl-C 退出。"""
    run_cli("start", N, home=tmp_path)
    run_cli("test", N, home=tmp_path)  # 评测过了：watch 一开始没有要评的，先说接着做哪道
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
        time.sleep(2)  # 让它启动并进入轮询
        workspace(tmp_path, CLI).write_text("class ReqState:\n    def __init__(self, a, b, c)\n")
        deadline = time.monotonic() + 30
        while progress_of(tmp_path)[CLI.slug]["last_verdict"] != "syntax":
            assert time.monotonic() < deadline and proc.poll() is None, "watch 没有评测改过的文件"
            time.sleep(0.3)
        time.sleep(0.5)  # 让它把结论打印完
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "正在监视" in out and f"接着做：{CLI.label}" in out and "保存就评测" in out
    assert "语法错误" in out and "这里会自动重新评测" in out
    assert f"test {N}" not in out, out
    assert "再见" in out and "Traceback" not in err
    assert progress_of(tmp_path)[CLI.slug]["last_verdict"] == "syntax"


def test_a_broken_progress_file_is_set_aside_not_a_crash(tmp_path):
    (tmp_path / ".progress.json").write_text("{ 这不是 JSON", encoding="utf-8")
    r = run_cli("hint", N, home=tmp_path)
    assert r.returncode == 0
    assert "读不出来" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / ".progress.json.broken").read_text(encoding="utf-8") == "{ 这不是 JSON"
    assert progress_of(tmp_path)[CLI.slug]["hints"] == 1
