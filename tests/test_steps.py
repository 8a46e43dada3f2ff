"""tools/steps.py 与 minibook.chapters：叠加、计数、文件树、diff、构建的保护，以及出错时的一行提示。"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minibook import chapters as C
from minibook import cli

REPO = Path(__file__).resolve().parents[1]
STEPS = [sys.executable, str(REPO / "tools" / "steps.py")]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def book(tmp_path, monkeypatch):
    """一本三章的小书：第 0 章只有 main，第 1 章新建并提前引入，第 2 章修改。"""
    manifest = tmp_path / "chapters" / "manifest.toml"
    write(manifest, textwrap.dedent("""
        [[chapter]]
        number = 0
        slug = "zero"
        title = "零"
        stage = "导读"
        main = "examples/ch00_zero.py"

        [[chapter]]
        number = 1
        slug = "one"
        title = "一"
        stage = "阶段一"
        main = "examples/ch01_one.py"
        early = [{ path = "minisgl/distributed/info.py", explained_in = 2 }]

        [[chapter]]
        number = 2
        slug = "two"
        title = "二"
        stage = "阶段一"
        main = "examples/ch02_two.py"

        [[chapter]]
        number = 3
        slug = "three"
        title = "三"
        stage = "阶段二"
        planned = true
    """))
    snaps = tmp_path / "snapshots"
    write(snaps / "ch00_zero/examples/ch00_zero.py", "print('zero')\n")
    # 第 0 章的第二个测试在后面的树里会失败：谁重跑了它，报告里就看得见
    write(snaps / "ch00_zero/tests/test_ch00_zero.py",
          "import os\n\ndef test_ok():\n    assert True\n\n"
          "def test_tree_has_no_core_yet():\n    assert not os.path.exists('minisgl/core.py')\n")
    for rel in ("minisgl/__init__.py", "minisgl/core.py", "minisgl/utils/__init__.py",
                "minisgl/utils/misc.py", "minisgl/distributed/info.py"):
        write(snaps / "ch01_one" / rel, f"# {rel} v1\n")
    write(snaps / "ch01_one/examples/ch01_one.py", "print('one')\n")
    # 第 1 章的第二个测试在第 2 章的树里会失败（core.py 被改了）：谁重跑了它，报告里就看得见
    write(snaps / "ch01_one/tests/test_ch01_one.py",
          "from pathlib import Path\n\ndef test_ok():\n    assert True\n\n"
          "def test_core_is_still_v1():\n    assert 'v1' in Path('minisgl/core.py').read_text()\n")
    write(snaps / "ch02_two/minisgl/core.py", "# core v2\nVALUE = 2\n")
    write(snaps / "ch02_two/minisgl/layers/linear.py", "# linear\n")
    write(snaps / "ch02_two/examples/ch02_two.py", "print('two')\n")
    write(snaps / "ch02_two/tests/test_ch02_two.py", "def test_ok():\n    assert True\n")
    monkeypatch.setattr(C, "MANIFEST", manifest)
    monkeypatch.setattr(C, "SNAPSHOTS", snaps)
    monkeypatch.setattr(C, "BUILD", tmp_path / "build")
    chapters = C.load_manifest(manifest)
    return tmp_path, chapters


def test_counts_come_from_snapshots(book):
    _, chapters = book
    assert C.changes(0, chapters).header() == "到这一章为止的文件：0 个（新建 0，修改 0，提前引入 0）"
    assert C.changes(1, chapters).header() == "到这一章为止的文件：5 个（新建 4，修改 0，提前引入 1）"
    assert C.changes(2, chapters).header() == "到这一章为止的文件：6 个（新建 1，修改 1，提前引入 0）"


def test_tree_marks_and_collapses(book):
    _, chapters = book
    text = C.tree_text(2, chapters)
    # 目录的最后一项用 └──，它下面的子树不再画竖线
    assert text.startswith(textwrap.dedent("""\
        minisgl/
        ├── __init__.py
        ├── core.py  ← 本章修改
        ├── distributed/
        │   └── info.py  ← 第 1 章提前引入，本章讲解
        ├── layers/
        │   └── linear.py  ← 本章新建
        └── utils/  （2 个文件，不变）
        examples/
        ├── ch00_zero.py
        ├── ch01_one.py
        └── ch02_two.py  ← 本章新建
        """))
    assert "info.py  ← 提前引入（第 2 章讲解）" in C.tree_text(1, chapters)


def test_the_chapter_that_explains_an_early_file_says_so(book):
    """提前引入的文件到了讲解它的那一章：它所在的目录展开，文件旁写明哪一章引入、本章讲解。"""
    _, chapters = book
    early = next(e for c in chapters for e in c.early)
    text = C.tree_text(early.explained_in, chapters)
    name = early.path.rsplit("/", 1)[-1]
    assert re.search(rf"{re.escape(name)}  ← (本章修改（)?第 \d+ 章提前引入，本章讲解", text), text
    assert "本章讲解" not in C.tree_text(early.explained_in - 1, chapters)


def test_build_overlays_in_order_and_is_idempotent(book):
    tmp, chapters = book
    tree = C.build(2, chapters=chapters)
    assert tree == tmp / "build" / "ch02"
    assert (tree / "minisgl/core.py").read_text() == "# core v2\nVALUE = 2\n"
    assert (tree / "minisgl/utils/misc.py").read_text() == "# minisgl/utils/misc.py v1\n"
    assert sorted(p.name for p in (tree / "examples").iterdir()) == ["ch00_zero.py", "ch01_one.py", "ch02_two.py"]
    first = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    C.build(2, chapters=chapters)
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == first
    assert [p.name for p in (tmp / "build").iterdir()] == ["ch02"]  # 没有残留的临时目录
    # 第 1 章的树里还是第 1 章的版本
    assert (C.build(1, chapters=chapters) / "minisgl/core.py").read_text() == "# minisgl/core.py v1\n"


def test_build_keeps_reader_edits_unless_forced(book):
    _, chapters = book
    tree = C.build(1, chapters=chapters)
    (tree / "minisgl/core.py").write_text("# 我改的\n")
    (tree / "notes.txt").write_text("笔记\n")
    (tree / "minisgl/__pycache__").mkdir()
    (tree / "minisgl/__pycache__/core.cpython-311.pyc").write_bytes(b"x")  # 运行产物不算改动
    with pytest.raises(C.ChapterError, match="改过的文件.*minisgl/core.py.*notes.txt"):
        C.build(1, chapters=chapters)
    assert (tree / "minisgl/core.py").read_text() == "# 我改的\n"
    C.build(1, force=True, chapters=chapters)
    assert (tree / "minisgl/core.py").read_text() == "# minisgl/core.py v1\n"
    assert not (tree / "notes.txt").exists()


def test_diff_shows_exactly_what_the_chapter_wrote(book):
    _, chapters = book
    diff = C.diff_text(2, chapters)
    assert "--- a/minisgl/core.py\n+++ b/minisgl/core.py" in diff
    assert "-# minisgl/core.py v1" in diff and "+VALUE = 2" in diff
    assert "--- /dev/null\n+++ b/minisgl/layers/linear.py" in diff
    assert "utils" not in diff


def test_bad_chapters_give_one_clear_line(book):
    _, chapters = book
    with pytest.raises(C.ChapterError, match="没有第 9 章"):
        C.get_chapter(9, chapters)
    with pytest.raises(C.ChapterError, match="不是章号"):
        C.get_chapter("x", chapters)
    with pytest.raises(C.ChapterError, match="第 3 章「三」还没写"):
        C.get_chapter(3, chapters)


def test_broken_snapshots_are_reported(book):
    tmp, chapters = book
    (tmp / "snapshots/ch02_two/examples/ch02_two.py").unlink()
    with pytest.raises(C.ChapterError, match="缺少 examples/ch02_two.py"):
        C.build(2, chapters=chapters)
    (tmp / "snapshots/ch01_one").rename(tmp / "snapshots/moved")
    with pytest.raises(C.ChapterError, match="快照目录 .*ch01_one 不存在"):
        C.build(1, chapters=chapters)


def test_unchanged_copy_is_caught(book):
    tmp, chapters = book
    write(tmp / "snapshots/ch02_two/minisgl/utils/misc.py", "# minisgl/utils/misc.py v1\n")
    assert C.unchanged_copies(2, chapters) == ["minisgl/utils/misc.py"]


def test_manifest_errors(tmp_path):
    bad = tmp_path / "m.toml"
    write(bad, '[[chapter]]\nnumber = 1\nslug = "a"\ntitle = "a"\nstage = "s"\nmain = "m.py"\n')
    with pytest.raises(C.ChapterError, match="章号是 1，应为 0"):
        C.load_manifest(bad)
    write(bad, "[[chapter\n")
    with pytest.raises(C.ChapterError, match="不是合法的 TOML"):
        C.load_manifest(bad)


# 清单里第一个还没写的章（写完一章，这里自动换成下一章；全书写完就不查这一条）
UNWRITTEN = [str(c.number) for c in C.load_manifest(C.MANIFEST) if c.planned][:1]


@pytest.mark.parametrize("args, message", [
    (["build", "99"], "没有第 99 章"),
    (["tree", "abc"], "不是章号"),
    *[(["diff", n], "还没写") for n in UNWRITTEN],
    *[(["check", n], "还没写") for n in UNWRITTEN],
    (["check", "3-2"], "是空的"),
])
def test_cli_errors_are_one_line_and_nonzero(args, message):
    proc = subprocess.run(STEPS + args, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_cli_list_and_tree_on_the_real_book():
    out = subprocess.run(STEPS + ["list"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "架构全景与最小引擎" in out
    assert ("（待写）" in out) == any(c.planned for c in C.load_manifest(C.MANIFEST))  # 计划中的章标“待写”
    assert "minisgl/ 下的文件" in out.splitlines()[0]  # 计数数的是什么，写在表头上
    # 按显示宽度对齐（汉字占两列）：每个已写章节的 main 都从同一列开始
    rows = [line for line in out.splitlines() if "examples/" in line]
    starts = {cli.display_width(line[:line.index("examples/")]) for line in rows}
    assert len(rows) == len(C.written_chapters()) and len(starts) == 1
    tree = subprocess.run(STEPS + ["tree", "1"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert tree.startswith("到这一章为止的文件：")
    assert "core.py  ← 本章新建" in tree
    assert "计数只数 minisgl/" in tree.splitlines()[0]


def test_cli_help_is_chinese_and_its_examples_use_written_chapters():
    proc = subprocess.run(STEPS + ["-h"], capture_output=True, text=True, cwd=REPO, check=True)
    assert proc.stdout.startswith("用法：python tools/steps.py")
    assert "显示这份帮助并退出" in proc.stdout and "show this help" not in proc.stdout
    written = {c.number for c in C.written_chapters()}
    used = {int(n) for n in re.findall(r"steps\.py (?:build|tree|diff|run|check) (\d+)", proc.stdout)}
    assert used and used <= written


@pytest.mark.parametrize("args, message", [
    ([], "缺少参数：命令"),
    (["bogus"], "没有 'bogus' 这一项"),
    (["build"], "缺少参数：N"),
    (["list", "--nope"], "多余的参数：--nope"),
])
def test_cli_usage_errors_are_chinese(args, message):
    proc = subprocess.run(STEPS + args, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert message in proc.stderr and "用法：" in proc.stderr and "-h 查看帮助" in proc.stderr
    assert "usage:" not in proc.stderr and "error:" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture
def steps_module():
    sys.path.insert(0, str(REPO / "tools"))
    import steps

    return steps


def test_modified_files_decide_what_check_reruns(book):
    tmp, chapters = book
    assert C.modified_files(0, chapters) == []
    assert C.modified_files(1, chapters) == []  # 只新建文件
    assert C.modified_files(2, chapters) == ["minisgl/core.py"]
    write(tmp / "snapshots/ch01_one/tests/conftest.py", "")  # 新加的 pytest 配置会影响别的测试
    assert C.modified_files(1, chapters) == ["tests/conftest.py"]


def test_reruns_start_at_the_first_chapter_that_had_a_modified_file(book):
    tmp, chapters = book
    assert C.earlier_tests_to_rerun(1, chapters) == []  # 只新建文件
    assert [c.number for c in C.earlier_tests_to_rerun(2, chapters)] == [1]  # core.py 第 1 章才有
    write(tmp / "snapshots/ch02_two/minisgl/__init__.py", "# v2\n")  # 仍是第 1 章才有的文件
    assert [c.number for c in C.earlier_tests_to_rerun(2, chapters)] == [1]
    write(tmp / "snapshots/ch02_two/examples/ch00_zero.py", "print('zero v2')\n")  # 第 0 章就有
    assert [c.number for c in C.earlier_tests_to_rerun(2, chapters)] == [0, 1]
    write(tmp / "snapshots/ch01_one/tests/conftest.py", "")  # pytest 配置影响所有测试
    assert [c.number for c in C.earlier_tests_to_rerun(1, chapters)] == [0]


def test_check_runs_only_the_chapters_own_tests_when_it_only_adds_files(book, steps_module, capsys):
    """第 1 章只新建文件：只跑它自己的测试（第 0 章那个在第 1 章的树里会失败的测试没有跑）。"""
    assert steps_module.main(["check", "0-1"]) == 0
    out = capsys.readouterr().out
    assert "合计：2 章通过，0 章失败" in out
    assert out.count("测试：本章 2 通过（本章只新建文件") == 2  # 第 0、1 章各自的两个测试
    row = next(line for line in out.splitlines() if line.startswith("ch01 "))
    assert "2 通过" in row and "不重跑" in row and row.endswith("✓")


def test_check_reruns_earlier_tests_when_the_chapter_modifies_an_earlier_file(book, steps_module, capsys):
    """第 2 章修改了 core.py（第 1 章才有）：第 1 章的测试重跑，其中一个在这里失败，这一章就不通过。
    第 0 章的树里还没有 core.py，它的测试碰不到被改的文件，不重跑（它那个会失败的测试没有出现）。"""
    assert steps_module.main(["check", "2"]) == 1
    out = capsys.readouterr().out
    assert "本章改了前几章也用的 minisgl/core.py，第 1 章的测试重跑" in out
    assert "测试：本章 1 通过；前几章 1 通过，1 失败" in out
    assert "test_core_is_still_v1" in out  # 失败的测试和它的输出在报告里
    assert "test_tree_has_no_core_yet" not in out
    assert "合计：0 章通过，1 章失败" in out


def test_check_no_rerun_runs_only_the_chapters_own_tests(book, steps_module, capsys):
    """--no-rerun：第 2 章改了 core.py 也只跑它自己的测试（第 1 章那个会失败的测试没有跑）。"""
    assert steps_module.main(["check", "2", "--no-rerun"]) == 0
    out = capsys.readouterr().out
    assert "测试：本章 1 通过（按 --no-rerun 不重跑前几章的测试）" in out and "test_core_is_still_v1" not in out
    assert "合计：1 章通过，0 章失败" in out


def test_check_rerun_all_reruns_every_earlier_chapter(book, steps_module, capsys):
    """--rerun-all：第 2 章只改了第 1 章才有的 core.py，第 0 章的测试也在第 2 章的树里重跑（它那个会失败的测试出现了）。"""
    assert steps_module.main(["check", "2", "--rerun-all"]) == 1
    out = capsys.readouterr().out
    assert "测试：本章 1 通过；前几章 2 通过，2 失败（--rerun-all：第 0–1 章的测试都在这棵树里重跑）" in out
    assert "test_tree_has_no_core_yet" in out and "test_core_is_still_v1" in out


def test_check_skips_what_it_is_told_the_notebook_ran(book, steps_module, capsys):
    """--skip-main / --skip-own-tests（CI 用）：坏了的 main 和会失败的本章测试都没有跑；要重跑的前几章照样跑。"""
    tmp, _ = book
    write(tmp / "snapshots/ch01_one/examples/ch01_one.py", "raise SystemExit('main 坏了')\n")
    write(tmp / "snapshots/ch01_one/tests/test_ch01_one.py", "def test_bad():\n    assert False\n")
    assert steps_module.main(["check", "1", "--skip-main", "--skip-own-tests"]) == 0
    out = capsys.readouterr().out
    assert "main：examples/ch01_one.py  跳过（--skip-main）" in out and "main 坏了" not in out
    assert "本章的跳过（--skip-own-tests）" in out and "test_bad" not in out
    row = next(line for line in out.splitlines() if line.startswith("ch01 "))
    assert row.count("跳过") == 2 and row.endswith("✓")

    write(tmp / "snapshots/ch02_two/tests/test_ch02_two.py", "def test_bad_two():\n    assert False\n")
    assert steps_module.main(["check", "2", "--skip-own-tests"]) == 1  # 第 1 章的测试重跑，它失败了
    out = capsys.readouterr().out
    assert "test_bad" in out and "test_bad_two" not in out
    assert steps_module.main(["check", "2", "--skip-own-tests", "--no-rerun"]) == 0


def test_check_skip_own_k_skips_only_the_chapters_own_selected_tests(book, steps_module, capsys):
    """--skip-own-k：本章测试里 -k 选中的不跑（notebook 跑过）；前几章的同名测试照样重跑；一个不剩也算通过。"""
    assert steps_module.main(["check", "1", "--skip-own-k", "ok"]) == 0
    assert "测试：本章 1 通过（-k 选中的跳过：ok）" in capsys.readouterr().out
    assert steps_module.main(["check", "2", "--skip-own-k", "ok"]) == 1  # 第 1 章的 test_ok 照跑，另一个失败
    assert "测试：本章 0 个（-k 选中的跳过：ok）；前几章 1 通过，1 失败" in capsys.readouterr().out
    assert steps_module.main(["check", "2", "--no-rerun", "--skip-own-k", "ok"]) == 0
    assert "测试：本章 0 个（-k 选中的跳过：ok）（按 --no-rerun" in capsys.readouterr().out


def test_check_fails_on_a_broken_main_and_keeps_the_readers_tree(book, steps_module, capsys):
    tmp, _ = book
    write(tmp / "snapshots/ch01_one/examples/ch01_one.py", "raise SystemExit('main 坏了')\n")
    assert steps_module.main(["check", "1"]) == 1
    out = capsys.readouterr().out
    assert "main：examples/ch01_one.py  失败" in out and "main 坏了" in out
    assert "合计：0 章通过，1 章失败" in out
    assert not (tmp / "build" / "ch01").exists()  # check 只用 build/check/，不碰读者的树


def test_check_fails_when_the_chapter_has_no_passing_test(book, steps_module, capsys):
    tmp, _ = book
    write(tmp / "snapshots/ch01_one/tests/test_ch01_one.py", "# 还没写测试\n")
    assert steps_module.main(["check", "1"]) == 1
    assert "合计：0 章通过，1 章失败" in capsys.readouterr().out


def test_check_rejects_an_empty_range(book, steps_module, capsys):
    assert steps_module.main(["check", "2-1"]) == 2
    err = capsys.readouterr().err
    assert "范围「2-1」是空的" in err and "1-2" in err


def test_run_builds_a_missing_tree_and_passes_the_exit_code_through(book, steps_module):
    tmp, _ = book
    code = "import minisgl.core, sys; sys.exit(7 if 'v1' in open(minisgl.core.__file__).read() else 1)"
    assert steps_module.main(["run", "1", "--", sys.executable, "-c", code]) == 7
    assert (tmp / "build/ch01/minisgl/core.py").is_file()


def test_run_uses_the_tree_as_the_learner_left_it(book, steps_module, capfd):
    tmp, _ = book
    tree = C.build(1)
    (tree / "minisgl/core.py").write_text("EDITED = True\n")
    (tree / "scratch.py").write_text("import minisgl.core\nprint('edited:', minisgl.core.EDITED)\n")
    assert steps_module.main(["run", "1", "--", sys.executable, "scratch.py"]) == 0
    out, err = capfd.readouterr()
    assert "edited: True" in out
    assert "改过" in err and "minisgl/core.py" in err  # 说一声：按你改过的样子运行
    assert (tree / "minisgl/core.py").read_text() == "EDITED = True\n"  # 没有被重新搭的树覆盖


def test_run_errors_are_clear(book, steps_module, capsys):
    assert steps_module.main(["run", "1", "--", "no-such-command-xyz"]) == 2
    err = capsys.readouterr().err
    assert "找不到命令「no-such-command-xyz」" in err and "Traceback" not in err
    assert steps_module.main(["run", "1"]) == 2
    assert "run 后面要跟命令" in capsys.readouterr().err


def test_check_offline_first_run_says_what_to_do(tmp_path):
    """第一次运行、又连不上 PyPI：一条中文说明（怎么办），退出码非零，缓存里不留半成品。"""
    env = {**os.environ, "MINISGL_CACHE": str(tmp_path), "PIP_CONFIG_FILE": os.devnull,
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "", "PIP_FIND_LINKS": "",
           "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}
    env.pop("MINISGL_SMOLLM2_WHEEL", None)
    proc = subprocess.run(STEPS + ["check", "0"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert proc.returncode == 2
    assert "准备模型失败" in proc.stderr and "MINISGL_SMOLLM2_WHEEL" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not [p for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")]


# 一个像服务器启动器那样收尾的命令：收到 SIGINT 或 SIGTERM 后花 1 秒收尾（停子进程、删临时目录），
# 写下一个文件，以退出码 3 结束。subprocess.call 在 Ctrl-C 后 0.25 秒就 SIGKILL 它，文件永远写不出来。
SLOW_CLEANUP = """
import signal, sys, time
from pathlib import Path
stop = []
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda signum, frame: stop.append(signum))
Path(sys.argv[1], "ready").touch()
while not stop:
    time.sleep(0.02)
time.sleep(1.0)
Path(sys.argv[1], "cleaned").write_text(signal.Signals(stop[0]).name)
sys.exit(3)
"""


def _run_in_tiny_book(book, signal_to_send, whole_group):
    """在小书的第 1 章里 `steps.py run 1 -- python child.py`（单独一个进程组，像终端里的前台作业）。"""
    import signal
    import time

    tmp, _ = book
    child = tmp / "child.py"
    child.write_text(SLOW_CLEANUP)
    wrapper = (f"import sys; sys.path.insert(0, {str(REPO / 'tools')!r})\n"
               "from pathlib import Path\nfrom minibook import chapters as C, cli\n"
               f"C.MANIFEST, C.SNAPSHOTS, C.BUILD = Path({str(C.MANIFEST)!r}), Path({str(C.SNAPSHOTS)!r}), "
               f"Path({str(C.BUILD)!r})\n"
               "import steps\n"
               f"cli.run(steps.main, ['run', '1', '--', sys.executable, {str(child)!r}, {str(tmp)!r}])\n")
    proc = subprocess.Popen([sys.executable, "-c", wrapper], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (tmp / "ready").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "命令没有启动"
            time.sleep(0.02)
        if whole_group:  # 终端里的 Ctrl-C：SIGINT 发给整个前台进程组
            os.killpg(proc.pid, signal_to_send)
        else:  # kill <pid>：只发给 steps.py，它要转给命令
            os.kill(proc.pid, signal_to_send)
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, tmp / "cleaned"


def test_run_lets_the_command_clean_up_after_ctrl_c(book):
    import signal

    code, cleaned = _run_in_tiny_book(book, signal.SIGINT, whole_group=True)
    assert cleaned.exists() and cleaned.read_text() == "SIGINT"  # 收尾做完了，没有被 SIGKILL 打断
    assert code == 3  # steps.py 的退出码就是命令的退出码


def test_run_forwards_sigterm_to_the_command(book):
    import signal

    code, cleaned = _run_in_tiny_book(book, signal.SIGTERM, whole_group=False)
    assert cleaned.exists() and cleaned.read_text() == "SIGTERM"
    assert code == 3


# ---------------------------------------------------------------- carry：改动带进后面的副本


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def carry_book(book):
    """一本提交进 git 的小书，第 2 章的 core.py 在第 1 章那份的基础上多了一行。"""
    tmp, chapters = book
    core1 = tmp / "snapshots/ch01_one/minisgl/core.py"
    write(core1, "def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    write(tmp / "snapshots/ch02_two/minisgl/core.py",
          "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():  # 第 2 章新加\n    return 3\n")
    _git(tmp, "init", "-q")
    _git(tmp, "add", "-A")
    _git(tmp, "commit", "-q", "-m", "book")
    return tmp, chapters, core1


def test_carry_merges_an_edit_into_later_copies_and_keeps_their_changes(carry_book):
    from minibook import carry as K

    tmp, chapters, core1 = carry_book
    core1.write_text("def a():\n    return 10  # 修好了\n\n\ndef b():\n    return 2\n")
    carried = K.carry(1, chapters=chapters)
    core2 = tmp / "snapshots/ch02_two/minisgl/core.py"
    assert [c.target for c in carried] == [core2]
    text = core2.read_text()
    assert "return 10  # 修好了" in text and "def c():  # 第 2 章新加" in text
    assert "return 1\n" not in text
    assert K.plan(1, chapters=chapters) == []  # 再来一次：已经带进去了，什么也不写


def test_carry_stops_on_a_conflict_and_writes_nothing(carry_book):
    from minibook import carry as K

    tmp, chapters, core1 = carry_book
    core2 = tmp / "snapshots/ch02_two/minisgl/core.py"
    core2.write_text(core2.read_text().replace("return 2", "return 20  # 第 2 章改了这一行"))
    core1.write_text(core1.read_text().replace("return 2", "return 200"))
    before = core2.read_bytes()
    with pytest.raises(C.ChapterError, match="1 处冲突.*一个文件也没有写"):
        K.carry(1, chapters=chapters)
    assert core2.read_bytes() == before


def test_carry_since_uses_an_older_commit_as_the_base(carry_book):
    from minibook import carry as K

    tmp, chapters, core1 = carry_book
    core1.write_text(core1.read_text().replace("return 1", "return 11"))
    _git(tmp, "commit", "-q", "-am", "fix ch01 only")
    assert K.plan(1, chapters=chapters) == []  # 相对 HEAD 没有改动
    carried = K.carry(1, rev="HEAD~1", chapters=chapters)
    assert len(carried) == 1 and "return 11" in carried[0].target.read_text()


def test_carry_cli_on_the_real_book_reports_nothing_to_do():
    out = subprocess.run([*STEPS, "carry", "0", "--dry-run"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "第 0 章" in out.stdout
