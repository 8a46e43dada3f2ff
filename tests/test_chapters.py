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


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_chapter_builds_runs_and_passes_its_tests(ch):
    """每章跑 main 和自己的测试。前几章的测试只在最后一章的树里重跑：那棵树里有每一章改过的文件，
    跑一遍就够了（省下 CI 的时间）；读者的 steps.py check 仍然逐章重跑。"""
    last = ch.number == WRITTEN[-1].number
    args = ["check", str(ch.number)] + ([] if last else ["--no-rerun"])
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "steps.py"), *args],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "合计：1 章通过，0 章失败" in proc.stdout
    assert re.search(r"测试：本章 \d+ 通过", proc.stdout), proc.stdout[-2000:]
    if last and C.modified_files(ch.number):  # 改了前几章的文件：前几章的测试也在这棵树里跑过
        assert "章的测试重跑" in proc.stdout


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
