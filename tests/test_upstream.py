"""每章“官方实现”一节引用的上游 文件 · 符号 与行号，和 tools/minibook/upstream.json 一字不差。"""

import subprocess

import pytest

from minibook import chapters as C
from minibook import cli, upstream
from minibook.listing import extract

INDEX = upstream.load_index()
FIRST = C.written_chapters()[1].notebook  # 第 1 章：有引用的一章


def test_every_chapter_cites_upstream_with_the_indexed_line_ranges():
    """每个已写的章节都有“官方实现”一节，紧跟“与上游的差异”；每条引用都在索引里，行号相同；
    索引里没有没人引用的符号；术语表链到索引固定的提交。"""
    problems = upstream.problems()
    assert not problems, "\n".join(problems)


def test_a_typed_range_that_drifts_from_the_index_is_caught():
    text = FIRST.read_text(encoding="utf-8")
    citations, bad = upstream.parse(text, FIRST.name)
    assert citations and not bad
    c = citations[0]
    typed = f"`{c.symbol}`（第 {c.start}～{c.end} 行）"
    assert typed in text
    for wrong in (f"`{c.symbol}`（第 {c.start}～{c.end + 1} 行）", f"`{c.symbol}`（第 {c.start - 1}～{c.end} 行）"):
        moved, _ = upstream.parse(text.replace(typed, wrong, 1), FIRST.name)
        problems = upstream.check(INDEX, moved)
        assert len(problems) == 1 and c.symbol in problems[0] and f"第 {c.start}～{c.end} 行" in problems[0]


def test_a_citation_without_a_proper_range_or_missing_from_the_index_is_caught():
    text = FIRST.read_text(encoding="utf-8")
    c = upstream.parse(text, FIRST.name)[0][0]
    typed = f"`{c.symbol}`（第 {c.start}～{c.end} 行）"
    _, bad = upstream.parse(text.replace(typed, f"`{c.symbol}`（第 {c.start}-{c.end} 行）", 1), FIRST.name)
    assert any("没有写成" in p for p in bad)
    unknown, _ = upstream.parse(text.replace(typed, f"`{c.symbol}Gone`（第 {c.start}～{c.end} 行）", 1), FIRST.name)
    assert any("不在" in p for p in upstream.check(INDEX, unknown))
    # 索引里多出一个没人引用的符号也要报：索引只收书里引用的符号
    extra = {"repo": INDEX["repo"], "commit": INDEX["commit"],
             "symbols": {c.key: [c.start, c.end], "python/minisgl/core.py::Gone": [1, 2]}}
    assert upstream.check(extra, [c]) == []
    assert upstream.unused(extra, [c]) == [
        "upstream.json 里的 python/minisgl/core.py::Gone 没有章节引用（重新生成索引：python -m minibook.upstream index）"]


def test_the_section_must_exist_and_follow_the_differences():
    text = FIRST.read_text(encoding="utf-8")
    _, bad = upstream.parse(text.replace("# ## 官方实现", "# ## 别的小节"), FIRST.name)
    assert any("没有“## 官方实现”" in p for p in bad)
    moved = text.replace("# ## 官方实现", "# ## 插在中间\n#\n# 一段话\n\n# %% [markdown]\n# ## 官方实现")
    _, bad = upstream.parse(moved, FIRST.name)
    assert any("紧跟" in p for p in bad)


def test_the_glossary_must_link_the_pinned_commit():
    text = upstream.GLOSSARY.read_text(encoding="utf-8")
    assert upstream.check_glossary(INDEX, text) == []
    other = text.replace(INDEX["commit"], "0" * 40)
    assert upstream.check_glossary(INDEX, other)


SOURCE = '''import functools

LIMIT = 3


@functools.cache
def cached(x):
    return x + 1


class Box:
    size: int = 1

    def grow(self, n):
        self.size += n
        return self.size
'''


@pytest.mark.parametrize("symbol", ["LIMIT", "cached", "Box", "Box.size", "Box.grow"])
def test_symbol_ranges_are_the_lines_a_listing_shows(tmp_path, symbol):
    """与书里代码清单的取法相同：带装饰器，到符号的最后一行。"""
    path = tmp_path / "m.py"
    path.write_text(SOURCE, encoding="utf-8")
    start, end = upstream.symbol_range(SOURCE, symbol)
    shown = extract(path, symbol).splitlines()
    assert len(shown) == end - start + 1
    assert shown[0].strip() == SOURCE.splitlines()[start - 1].strip()
    assert upstream.symbol_range(SOURCE, symbol + "_missing") is None


def test_index_is_built_from_the_commit_not_from_the_working_copy(tmp_path):
    """build_index 读的是提交里的文件：之后的改动不影响行号；找不到的符号是读者的错误。"""
    repo = tmp_path / "up"
    (repo / "python" / "minisgl").mkdir(parents=True)
    src = repo / "python" / "minisgl" / "m.py"
    src.write_text(SOURCE, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "m"], check=True)
    src.write_text("\n\n" + SOURCE, encoding="utf-8")  # 没提交的改动
    cite = upstream.Citation("t", 1, "python/minisgl/m.py", "Box.grow", 0, 0)
    index = upstream.build_index(repo / ".git", "HEAD", [cite])
    assert len(index["commit"]) == 40
    assert index["symbols"] == {"python/minisgl/m.py::Box.grow": list(upstream.symbol_range(SOURCE, "Box.grow"))}
    with pytest.raises(cli.UserError, match="没有符号"):
        upstream.build_index(repo / ".git", "HEAD", [upstream.Citation("t", 1, "python/minisgl/m.py", "Nope", 0, 0)])


def test_a_section_waiting_to_be_pasted_is_read_like_one_in_a_chapter():
    """还没插进章节的一节（每行带 "# "，不是单元）与插进去之后读出同样的引用。"""
    text = FIRST.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("# ## 官方实现")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%") or lines[i].startswith("# ## "))
    fragment = "\n".join(["#", *lines[start:end]])
    pasted, bad = upstream.parse(fragment, "ch01.md", fragment=True)
    assert not bad
    assert [(c.key, c.start, c.end) for c in pasted] == \
        [(c.key, c.start, c.end) for c in upstream.parse(text, FIRST.name)[0]]
