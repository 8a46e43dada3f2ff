"""每一章：用 steps.py check 单独搭出这一章的树，跑它的 main 和它的测试（修改了前几章文件的一章，
连同前几章的测试一起重跑）；再确认 notebook 与源同步、书页的组成部分齐全。"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from minibook import chapters as C

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import notebook  # noqa: E402  tools/notebook.py

WRITTEN = C.written_chapters()


def _rerun_chapter(chapters: list[C.Chapter]) -> C.Chapter | None:
    """前几章的测试在哪一章的树里重跑：最后一个修改了前几章文件的章。更晚的章只新建文件，弄不坏前几章的测试；
    这棵树里有到它为止每一章改过的文件，所以在这里把前面每一章的测试都重跑一遍（--rerun-all）。"""
    modifying = [c for c in chapters if c.number > 0 and C.modified_files(c.number)]
    return modifying[-1] if modifying else None


RERUN_IN = _rerun_chapter(WRITTEN)


def notebook_runs(ch: C.Chapter) -> tuple[bool, bool]:
    """这一章的 notebook 会不会照原样跑（没有 NBVAL_SKIP 的单元里的 run(...)）：
    （本章的 main，本章的全部测试）。只认最朴素的写法，认不出就当没跑——最多多跑一遍，不会少查。"""
    import ast
    import shlex

    import jupytext

    main = tests = False
    for cell in jupytext.read(ch.notebook).cells:
        if cell.cell_type != "code" or "NBVAL_SKIP" in cell.source:
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run"
                    and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                continue
            words = shlex.split(node.args[0].value)
            main = main or words == ["python", ch.main]
            if words[:3] == ["python", "-m", "pytest"]:
                rest = " ".join(words[3:]).replace("-p no:cacheprovider", "").split()
                # 只有这几个不改变“跑哪些测试”的选项；-k、-x、别的路径都不算跑了全部
                tests = tests or sorted(w for w in rest if w not in ("-q", "--color=no")) == [ch.test_file]
    return main, tests


def _ran_by_notebook_in_this_session(ch: C.Chapter, request) -> tuple[bool, bool]:
    """本次 pytest 也执行这一章的 notebook（README 的 `python -m pytest` 就是这样），而且 notebook 用的
    build/chNN 与快照一致：notebook 里照原样跑过的 main 和测试，这里不再跑第二遍。单独跑 tests/ 时照常全跑。"""
    executed = any(getattr(item, "path", None) == ch.ipynb for item in request.session.items)
    if not executed or C.local_edits(ch.build_dir):
        return False, False
    return notebook_runs(ch)


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_chapter_builds_runs_and_passes_its_tests(ch, request):
    """每章跑 main 和自己的测试；本次 pytest 执行的 notebook 已经照原样跑过的，这里不跑第二遍。
    前几章的测试只在最后一个修改了前几章文件的章的树里重跑（全部重跑一遍就够了，省下 CI 的时间）；
    读者的 steps.py check 仍然逐章重跑。"""
    rerun = RERUN_IN is not None and ch.number == RERUN_IN.number
    skip_main, skip_tests = _ran_by_notebook_in_this_session(ch, request)
    args = (["check", str(ch.number), "--rerun-all" if rerun else "--no-rerun"]
            + ["--skip-main"] * skip_main + ["--skip-own-tests"] * skip_tests)
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "steps.py"), *args],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "合计：1 章通过，0 章失败" in proc.stdout
    if skip_tests:
        assert "本章的跳过（--skip-own-tests）" in proc.stdout
    else:
        assert re.search(r"测试：本章 \d+ 通过", proc.stdout), proc.stdout[-2000:]
    if rerun:
        assert re.search(r"前几章 \d+ 通过.*--rerun-all", proc.stdout), proc.stdout[-2000:]


def test_notebooks_run_what_the_chapter_check_skips():
    """认得出 notebook 里照原样跑 main 和全部测试的单元（认不出就不跳过，所以这里只防“什么都认不出”）。"""
    seen = [notebook_runs(ch) for ch in WRITTEN]
    assert seen[0] == (True, True), "第 0 章的 notebook 照原样跑 main 和全部测试"
    assert sum(main for main, _ in seen) >= len(WRITTEN) // 2


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_notebook_is_executed_and_matches_its_source(ch):
    problem = notebook.out_of_sync(ch)
    assert problem is None, problem


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_notebook_follows_the_page_anatomy(ch):
    """每章都有书页的全部组成部分（标题之外的 11 个小节），顺序与 BOOK.md §4 一致。"""
    import jupytext

    nb = jupytext.read(ch.notebook)
    text = "\n".join(c.source for c in nb.cells)
    headings = [line for c in nb.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("## ")]
    parts = ["自测", "本章要回顾的文件", "这一步的 main", "运行", "与上游的差异", "测试",
             "怎么讲清楚", "练习", "小结"]
    positions = [next((i for i, h in enumerate(headings) if p in h), -1) for p in parts]
    missing = [p for p, pos in zip(parts, positions) if pos < 0]
    assert not missing, f"{ch.notebook.name} 缺少：{missing}"
    assert positions == sorted(positions), f"{ch.notebook.name} 的小节顺序不对：{headings}"
    assert text.lstrip().startswith("# ") or any(
        c.source.startswith("# 第") for c in nb.cells if c.cell_type == "markdown"), "缺少章标题"
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert f"setup({ch.number})" in sources
    for helper in ("header()", "tree()", "listing(", "run("):
        assert helper in sources, f"{ch.notebook.name} 没有用 {helper}"
    assert "??? " in text, "自测和练习的参考答案应当是可折叠的"


def test_markdown_only_sync_keeps_outputs_and_refuses_code_changes(tmp_path):
    """--markdown-only 只把文字抄进 .ipynb；代码单元一变就拒绝（输出必须来自真的执行）。"""
    import types

    import jupytext
    import nbformat

    from minibook import cli

    ch = WRITTEN[0]
    py, ipynb = tmp_path / ch.notebook.name, tmp_path / ch.ipynb.name
    py.write_text(ch.notebook.read_text(encoding="utf-8"), encoding="utf-8")
    ipynb.write_bytes(ch.ipynb.read_bytes())
    copy = types.SimpleNamespace(number=ch.number, notebook=py, ipynb=ipynb)  # 同一章，换到临时目录
    before = nbformat.read(ipynb, as_version=4)
    nb = jupytext.read(py)
    md = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown")
    nb.cells[md].source += "\n\n（改过的一句话）"
    jupytext.write(nb, py, fmt="py:percent")
    assert notebook.sync_markdown(copy) == 1
    after = nbformat.read(ipynb, as_version=4)
    assert after.cells[md].source.endswith("（改过的一句话）")
    assert [c.get("outputs") for c in after.cells] == [c.get("outputs") for c in before.cells]
    assert notebook.out_of_sync(copy) is None

    code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and i > md)
    nb.cells[code].source += "\nprint(1)"
    jupytext.write(nb, py, fmt="py:percent")
    with pytest.raises(cli.UserError, match="代码单元变了"):
        notebook.sync_markdown(copy)
