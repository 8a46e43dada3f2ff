"""网站：notebook → Markdown 的转换器、`mkdocs build --strict`、以及真浏览器里看到的页面。

(a) 转换器的单元测试，用测试里现造的小 notebook；
(b) 在真仓库上 `mkdocs build --strict`（有没有章节 notebook 都要能过），以及在仓库网站文件的临时副本
    里放一个假的「执行过的」章节，整站构建一遍；
(c) 用无头 Chromium 打开构建出的章节页，检查 JS 运行之后的 DOM，并截图留给人看；
(d) 在 1280 px 宽的 Chromium 里（playwright 驱动系统的 chromium）量版面：不超过 100 列的代码块不横向滚动，
    图上的字（正文里或点开放大后）不小于 12 px，表格里的标识符不从中间断开；首页的写作进度、术语表的锚点。
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from minibook import site
from minibook.chapters import load_manifest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PNG_1x1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
SVG = ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x">\n'
       '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10">\n\n'
       '  <rect width="20" height="10" fill="#3f51b5"/>\n</svg>\n')

INTRO = """# 最小引擎

一个文件、不依赖 minisgl 的推理引擎。

!!! note "为什么从这里开始"
    先看到整条路，再一块一块换掉。

??? question "自测参考答案"

    两次 all-reduce。

=== "Llama"

    Llama 没有 q_norm。

=== "Qwen3"

    Qwen3 在注意力前对 q、k 做 RMSNorm。"""

LISTING = '```python title="minisgl/core.py · Req"\nclass Req:\n    """一个请求"""\n\n    uid: int\n```'


def cell(source, outputs=(), tags=(), count=1):
    c = new_code_cell(source, execution_count=count, outputs=list(outputs))
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def stdout(text, name="stdout"):
    return new_output("stream", name=name, text=text)


def display(data):
    return new_output("display_data", data=data)


def error(ename="ZeroDivisionError", evalue="division by zero"):
    return new_output("error", ename=ename, evalue=evalue,
                      traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


def fake_chapter() -> nbformat.NotebookNode:
    """像一章那样的「执行过的」notebook：每一种单元和输出都有。"""
    cells = [
        new_markdown_cell(INTRO),
        cell("from minibook.page import *\nsetup(0)", [stdout("SETUP-SECRET\n")], tags=["remove-cell"]),
        cell('listing("minisgl/core.py", "Req")', [display({"text/markdown": LISTING, "text/plain": "<Markdown>"})],
             tags=["remove-input"]),
        cell("# NBVAL_IGNORE_OUTPUT\nimport time\nprint('用时', 1.5)\nprint('第二行')",
             [stdout("用时 1.5\n"), stdout("第二行\n")]),
        cell("!python examples/ch00_tiny_engine.py", [stdout("The capital of France is Paris.\n")]),
        cell("import sys\nprint('', file=sys.stderr)", [stdout("", name="stderr")]),
        cell("import warnings\nwarnings.warn('小心')", [stdout("UserWarning: 小心\n", name="stderr")]),
        cell("1 + 1", [new_output("execute_result", data={"text/plain": "2"}, execution_count=8)]),
        cell("show_png()", [display({"image/png": PNG_1x1, "text/plain": "<Figure>"})]),
        cell("show_svg()", [display({"image/svg+xml": SVG, "text/plain": "<SVG>"})]),
        new_markdown_cell("## 小结\n\n就这些。"),
    ]
    for i, c in enumerate(cells):
        if c.cell_type == "code":
            c.execution_count = i
    return new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}})


@pytest.fixture(scope="module")
def page():
    return site.render(fake_chapter(), "ch00_tiny_engine")


# ---------------------------------------------------------------- (a) 转换器


def test_markdown_cells_are_verbatim(page):
    assert INTRO in page.markdown
    assert page.title == "最小引擎"


def test_remove_cell_is_omitted(page):
    assert "setup(0)" not in page.markdown
    assert "SETUP-SECRET" not in page.markdown


def test_remove_input_keeps_markdown_output_verbatim(page):
    assert "listing(" not in page.markdown
    assert LISTING in page.markdown


def test_stream_output_is_one_labelled_block(page):
    block = '<div class="nb-output nb-stdout" markdown>\n\n```text title="输出"\n用时 1.5\n第二行\n```\n\n</div>'
    assert block in page.markdown


def test_nbval_comment_is_stripped(page):
    assert "NBVAL" not in page.markdown
    assert "```python\nimport time\nprint('用时', 1.5)" in page.markdown


def test_shell_cell_is_a_bash_block(page):
    assert "```bash\n$ python examples/ch00_tiny_engine.py\n```" in page.markdown
    assert "!python" not in page.markdown


def test_stderr_dropped_when_empty_shown_when_not(page):
    assert page.markdown.count("nb-stderr") == 1
    assert '```text title="stderr"\nUserWarning: 小心\n```' in page.markdown


def test_plain_result_and_images(page):
    assert '```text title="输出"\n2\n```' in page.markdown
    (png,) = [name for name in page.files if name.endswith(".png")]
    assert page.files[png] == base64.b64decode(PNG_1x1)
    assert f"]({png})" in page.markdown
    svg = page.markdown.split('<div class="nb-output nb-svg">')[1].split("</div>")[0]
    assert "<svg" in svg and "<?xml" not in svg and "DOCTYPE" not in svg and "\n\n" not in svg


def test_error_output_fails_loudly():
    nb = new_notebook(cells=[new_markdown_cell("# 标题"), cell("1/0", [error()])])
    with pytest.raises(site.NotebookError, match="第 2 个单元.*ZeroDivisionError"):
        site.render(nb, "ch09_x")
    hidden = new_notebook(cells=[new_markdown_cell("# 标题"), cell("setup(9)", [error()], tags=["remove-cell"])])
    with pytest.raises(site.NotebookError):
        site.render(hidden, "ch09_x")


def test_expected_exception_is_shown():
    for c in (cell("# NBVAL_RAISES_EXCEPTION\nReq(-1)", [error("ValueError", "uid < 0")]),
              cell("Req(-1)", [error("ValueError", "uid < 0")], tags=["raises-exception"])):
        md = site.render(new_notebook(cells=[new_markdown_cell("# 标题"), c]), "ch09_x").markdown
        assert "nb-error" in md and "ValueError: uid < 0" in md and "\x1b" not in md


def test_fence_is_longer_than_any_backticks_in_output():
    nb = new_notebook(cells=[new_markdown_cell("# 标题"), cell("print(doc)", [stdout("```python\nx = 1\n```\n")])])
    md = site.render(nb, "ch09_x").markdown
    assert '````text title="输出"\n```python\nx = 1\n```\n````' in md


def test_ansi_codes_and_progress_redraws_are_cleaned():
    assert site.clean_output_text("\x1b[32mok\x1b[0m\n 10%\r 50%\r100%\r\nend\n\n") == "ok\n100%\nend"


def test_title_is_first_heading():
    nb = new_notebook(cells=[new_markdown_cell("```\n# 不是标题\n```\n\n# 真标题\n\n# 第二个")])
    assert site.notebook_title(nb) == "真标题"
    with pytest.raises(site.NotebookError, match="一级标题"):
        site.notebook_title(new_notebook(cells=[new_markdown_cell("## 只有二级标题")]))


def test_chapter_kicker_from_manifest():
    ch = load_manifest(REPO / "chapters" / "manifest.toml")[1]
    md = site.render(fake_chapter(), ch.name, ch).markdown
    assert f'<p class="nb-kicker">手写 mini-sglang · {ch.stage} · 第 1 章</p>' in md


def write_manifest(root: Path) -> None:
    (root / "chapters").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "chapters" / "manifest.toml", root / "chapters" / "manifest.toml")


def test_a_fold_cell_goes_into_the_box_the_markdown_opened():
    nb = new_notebook(cells=[
        new_markdown_cell('# 页\n\n??? note "深入：细节"\n\n    先说一句'),
        new_code_cell("print('里面')", metadata={"tags": ["fold"]},
                      outputs=[new_output("stream", name="stdout", text="里面\n")]),
        new_markdown_cell("回到主线"),
    ])
    md = site.render(nb, "p").markdown
    box = md[md.index("??? note"):md.index("回到主线")]
    assert "    ```python\n    print('里面')\n    ```" in box
    assert '    <div class="nb-output' in box and "    里面" in box
    assert site.main_line_chars(md[md.index("# 页"):]) == len("页深入细节回到主线")  # 框里的都不算


def test_main_line_counts_everything_but_folded_boxes():
    md = ("# 标题\n\n正文四个\n\n```python\nx = 1  # 注释\n```\n\n"
          '??? note "折叠"\n\n    折叠里的字不算\n\n    还是不算\n\n之后\n\n!!! warning "提示"\n    提示框算\n')
    # 标题 2 + 正文四个 4 + 注释 2 + 折叠（标题行）2 + 之后 2 + 提示 2 + 提示框算 4
    assert site.main_line_chars(md) == 18


# WRITING.md：主线在种子章的长度上下，深入的内容放进折叠块。评审点名的几章，主线不超过 5000 个汉字。
MAIN_LINE_LIMIT = {"ch09_radix_cache": 5000, "ch11_overlap": 5000, "ch15_server": 5000, "ch16_tp": 5000, "ch17_fast_attention": 5000,
                   "ch19_kernels": 5000, "ch20_moe": 5000, "ch21_benchmark": 5000}


@pytest.mark.parametrize("name", sorted(MAIN_LINE_LIMIT))
def test_main_line_stays_within_its_length(name):
    (chapter,) = [c for c in load_manifest() if c.name == name]
    nb = nbformat.read(site.notebook_path(REPO, chapter), as_version=4)
    chars = site.main_line_chars(site.render(nb, name, chapter).markdown)
    assert chars <= MAIN_LINE_LIMIT[name], f"{name} 的主线有 {chars} 个汉字，上限 {MAIN_LINE_LIMIT[name]}：把细节收进折叠块"


def test_build_pages_writes_executed_removes_stale_skips_the_rest(tmp_path):
    write_manifest(tmp_path)
    nbformat.write(fake_chapter(), tmp_path / "chapters" / "ch00_tiny_engine.ipynb")
    unexecuted = fake_chapter()
    for c in unexecuted.cells:
        if c.cell_type == "code":
            c.execution_count, c.outputs = None, []
    nbformat.write(unexecuted, tmp_path / "chapters" / "ch01_core.ipynb")
    nbformat.write(fake_chapter(), tmp_path / "chapters" / "scratch.ipynb")
    out = tmp_path / "docs" / "chapters"
    out.mkdir(parents=True)
    (out / "ch05_attention.md").write_text("过期页面")

    report = site.build_pages(tmp_path)
    assert [p.name for p in report.pages] == ["ch00_tiny_engine.md"]
    assert sorted(p.name for p in out.iterdir()) == ["ch00_tiny_engine.md", "ch00_tiny_engine.out9-1.png"]
    assert [p.name for p in report.removed] == ["ch05_attention.md"]
    assert any("ch01_core.ipynb" in s and "还没执行" in s for s in report.skipped)
    assert any("scratch.ipynb" in s and "manifest" in s for s in report.skipped)
    assert [c.number for c in site.available_chapters(tmp_path)] == [0]
    text = (out / "ch00_tiny_engine.md").read_text(encoding="utf-8")
    assert "导读 · 第 0 章" in text

    mtime = (out / "ch00_tiny_engine.md").stat().st_mtime_ns
    time.sleep(0.01)
    site.build_pages(tmp_path)  # 内容没变就不重写（mkdocs serve 监视 docs/）
    assert (out / "ch00_tiny_engine.md").stat().st_mtime_ns == mtime


# ---------------------------------------------------------------- (b) mkdocs build --strict


MILESTONE = """---
stage: 阶段一 · 算得对
---

# 里程碑探针

<!-- minibook:stage-stats -->

<!-- minibook:output 0 milestone -->

<!-- minibook:output 6 milestone -->

- [ ] 跑一遍 `python tools/steps.py check 6`
"""


def mkdocs_build(root: Path, site_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)],
                          cwd=root, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict 失败：\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def real_site(real_site_dir):
    """真仓库的网站，构建到临时目录（tests/conftest.py：整个会话构建一次，浏览器里的练习也用它）。"""
    return real_site_dir


@pytest.fixture(scope="module")
def fake_site(tmp_path_factory):
    """仓库网站文件的副本 + 一个假的执行过的第 0 章：不依赖别人写没写完章节。"""
    root = tmp_path_factory.mktemp("fake")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs", ignore=shutil.ignore_patterns("chapters"))
    (root / "tools").mkdir()
    shutil.copy(REPO / "tools" / "mkdocs_hooks.py", root / "tools")
    shutil.copytree(REPO / "tools" / "minibook", root / "tools" / "minibook",
                    ignore=shutil.ignore_patterns("__pycache__", "configs"))
    shutil.copytree(REPO / "practice", root / "practice",
                    ignore=shutil.ignore_patterns("__pycache__", "workspace", ".progress.json"))
    write_manifest(root)
    shutil.copytree(REPO / "snapshots", root / "snapshots")  # 阶段页的计数从快照算
    nb = fake_chapter()
    nb.cells[4].metadata["tags"] = ["milestone"]  # 里程碑探针页引用这个单元的输出
    nbformat.write(nb, root / "chapters" / "ch00_tiny_engine.ipynb")
    (root / "docs" / "milestone-probe.md").write_text(MILESTONE, encoding="utf-8")
    (root / "docs" / "layout-probe.md").write_text(PROBE, encoding="utf-8")  # (d) 量版面用
    (root / "docs" / "assets" / "probe-diagram.svg").write_text(PROBE_SVG, encoding="utf-8")
    mkdocs_build(root, root / "site")
    return root / "site"


def test_real_repo_builds_strict(real_site):
    home = (real_site / "index.html").read_text(encoding="utf-8")
    chapters = load_manifest(REPO / "chapters" / "manifest.toml")
    available = {ch.number for ch in site.available_chapters(REPO, chapters)}
    for ch in chapters:
        assert ch.title in home  # 章节计划表从清单生成
        page = real_site / "chapters" / ch.name / "index.html"
        assert page.is_file() == (ch.number in available)
    if len(available) < len(chapters):
        assert "待写" in home
    for stage in dict.fromkeys(ch.stage for ch in chapters):
        assert stage in home


def test_a_stage_acceptance_page_comes_after_its_chapters(real_site):
    """读完一章点"下一页"，到的是下一章，不是引用了后面各章结果的验收页。"""
    chapters = load_manifest(REPO / "chapters" / "manifest.toml")
    available = [ch for ch in site.available_chapters(REPO, chapters)]
    checked = 0
    for stage_dir in sorted((REPO / "docs" / "stages").iterdir()):
        text = (stage_dir / "index.md").read_text(encoding="utf-8")
        if "<!-- minibook:stage-stats -->" not in text:
            continue
        stage = re.search(r"^stage: (.+)$", text, re.M).group(1).strip()
        members = [ch for ch in available if ch.stage == stage]
        html = (real_site / "stages" / stage_dir.name / "index.html").read_text(encoding="utf-8")
        prev = re.search(r'<a href="([^"]+)" class="md-footer__link md-footer__link--prev"', html)
        assert prev and f"chapters/{members[-1].name}/" in prev.group(1), (stage, prev)
        first = (real_site / "chapters" / members[0].name / "index.html").read_text(encoding="utf-8")
        before = re.search(r'<a href="([^"]+)" class="md-footer__link md-footer__link--prev"', first)
        assert before and f"stages/{stage_dir.name}/" not in before.group(1), (stage, before)
        checked += 1
    assert checked >= 3


def test_nav_is_not_typed_by_hand():
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert not re.search(r"^nav:", config, re.M) and "chapters/ch" not in config
    assert "tools/mkdocs_hooks.py" in config


def test_chinese_search_index(real_site):
    index = json.loads((real_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert index["config"]["lang"] == ["zh", "en"]
    assert "\\u200b" in index["config"]["separator"]  # jieba 用零宽空格分词，分隔符必须认它
    text = "".join(doc["text"] for doc in index["docs"])
    assert "\u200b调度器\u200b" in text  # docs/assets/jieba_userdict.txt 里的词不被切开


def test_fake_chapter_site(fake_site):
    html = (fake_site / "chapters" / "ch00_tiny_engine" / "index.html").read_text(encoding="utf-8")
    assert '<details class="question">' in html
    assert 'class="admonition note"' in html
    assert 'class="tabbed-set tabbed-alternate"' in html
    assert 'class="nb-output nb-stdout"' in html and "The capital of France is Paris." in html
    assert '<span class="filename">minisgl/core.py · Req</span>' in html
    assert "<svg" in html and (fake_site / "chapters" / "ch00_tiny_engine.out9-1.png").is_file()
    assert '<p class="nb-kicker">' in html
    home = (fake_site / "index.html").read_text(encoding="utf-8")
    # 导航：阶段成节，已执行的章节有链接，计划表里也有链接；没有页面的章节写「待写」
    assert 'href="chapters/ch00_tiny_engine/"' in home
    assert re.search(r"第 0 章 架构全景与最小引擎", home)
    stage_page = (fake_site / "stages" / "correct" / "index.html").read_text(encoding="utf-8")
    assert "核心数据结构" in stage_page and "待写" in stage_page


# ---------------------------------------------------------------- (c) 真浏览器


def chromium(tmp_path: Path, *args: str) -> str:
    if CHROMIUM is None:
        pytest.skip("没有安装 chromium（Debian：apt-get install chromium），跳过浏览器测试")
    profile = tmp_path / f"profile-{time.monotonic_ns()}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def check_in_browser(page: Path, tmp_path: Path, shot: Path) -> str:
    url = page.resolve().as_uri()
    dom = chromium(tmp_path, "--dump-dom", url)
    assert re.search(r'<div class="language-python highlight">.*?<span class="[a-z]+">', dom, re.S), "没有高亮的代码块"
    assert 'class="nb-output' in dom, "没有输出块"
    assert "<details" in dom, "没有折叠的参考答案 <details>"
    # 复制按钮是 material 的 JS 加上的（静态 HTML 里没有）：旧版叫 md-clipboard，9.7 起是 md-code__button
    assert re.search(r'md-clipboard|<button class="md-code__button"[^>]*data-md-type="copy"', dom), \
        "代码复制按钮没有出现（material 的 JS 没有运行？）"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1800", "--hide-scrollbars", url)
    assert shot.is_file() and shot.stat().st_size > 10_000
    return dom


def test_fake_chapter_in_browser(fake_site, tmp_path):
    dom = check_in_browser(fake_site / "chapters" / "ch00_tiny_engine" / "index.html", tmp_path,
                           tmp_path / "fake_chapter.png")
    assert "tabbed-set" in dom and "admonition" in dom


def test_real_chapter_in_browser(real_site, tmp_path):
    available = site.available_chapters(REPO)
    if not available:
        pytest.skip("chapters/ 里还没有执行过的章节 notebook（chNN_slug.ipynb），没有章节页可看")
    ch = available[0]
    check_in_browser(real_site / "chapters" / ch.name / "index.html", tmp_path, tmp_path / f"{ch.name}.png")
    print(f"截图：{tmp_path / f'{ch.name}.png'}")


def test_practice_pages_come_from_the_exercise_manifest():
    """练习页由 practice/ 生成：每道题一页，提示折叠，表里的链接指向它们。"""
    from minibook import practice

    items = practice.exercises()
    assert items
    page = practice.exercise_page(items[0])
    assert page.count('??? tip "提示') >= 1 and "## 提示" not in page
    assert f"python practice/judge.py test {items[0].number}" in page
    index = practice.index_page()
    for ex in items:
        assert f"({'../'}{practice.page_uri(ex)})" in index


# ---------------------------------------------------------------- (d) 版面：1280 px 宽的 Chromium 里量出来
#
# 量的是版面本身（代码块会不会横向滚动、图上的字多大、表格里的标识符会不会从中间断开），
# 先在假站点里一页专门造的「探针」页上量（不依赖任何章节的文字），再在真站点的每个章节页上量。

LAYOUT_WIDTH = 1280
ASCII_100 = ("x = f(a, b) + g(c, d)  # " * 5)[:100]                     # 正好 100 列
CJK_100 = ("y = compute(x)" + " " * 80)[:80] + "# 中文注释，共九个字"   # 80 列 ASCII + 9 个汉字和标点（每个按 2 列算）
WIDE_140 = "z" * 140
PROBE = f"""# 版面探针

```python title="minisgl/probe.py · listing"
{ASCII_100}
{CJK_100}
```

<div class="nb-output nb-stdout" markdown>

```text title="输出"
{ASCII_100}
```

</div>

```text title="超过 100 列的输出：横向滚动，不折行"
{WIDE_140}
```

| 层 | 名字 | 形状 | 说明 | 公式 | 类 |
| --- | --- | --- | --- | --- | --- |
| 1 | `post_attention_layernorm` | `[max_running_req + 1, max_seq_len]` | 窄 | `hidden_size // num_attention_heads` | `LinearColParallelMerged` |
| 2 | `tie_word_embeddings` | `[2048, 1024]` | 窄 | `div_ceil(vocab, size)` | `VocabParallelEmbedding` |

![一张比正文列宽、字是 12 px 的图](assets/probe-diagram.svg)
"""
PROBE_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1400 300" width="1400" height="300">'
             '<rect width="1400" height="300" fill="#e8eaf6"/>'
             '<text x="20" y="40" font-size="12">12 px 的说明文字</text>'
             '<text x="20" y="120" font-size="30">标题</text></svg>\n')


def display_cols(line: str) -> int:
    """终端里的显示宽度：东亚宽字符算 2 列。"""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_probe_lines_are_what_they_claim():
    assert display_cols(ASCII_100) == 100 and display_cols(CJK_100) == 100 and display_cols(WIDE_140) == 140


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("没有安装 chromium（Debian：apt-get install chromium），跳过浏览器测试")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture()
def tab(browser):
    page = browser.new_page(viewport={"width": LAYOUT_WIDTH, "height": 900})
    yield page
    page.close()


# 每个 <pre>：最长一行的显示列数（东亚宽字符算 2 列），以及代码是否横向滚动
PRE_JS = r"""() => [...document.querySelectorAll('.md-content pre')].map(p => {
  const code = p.querySelector('code') || p;
  const lines = code.textContent.replace(/\n$/, '').split('\n');
  const wide = c => /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]/.test(c);
  const cols = Math.max(...lines.map(l => [...l].reduce((n, c) => n + (wide(c) ? 2 : 1), 0)));
  return {cols, scrolls: code.scrollWidth > code.clientWidth + 1, head: lines[0].slice(0, 40)};
})"""

# 表格里的行内代码：换行发生在两个都不是空白（也不是汉字）的字符之间，就是把一个词从中间断开了
BROKEN_JS = r"""() => {
  const bad = [], soft = c => /\s|[\u2e80-\u9fff\uff00-\uffef]/.test(c);
  for (const code of document.querySelectorAll('.md-content td code, .md-content th code')) {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let top = null, prev = ' ';
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (let i = 0; i < n.length; i++) {
        const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
        const rects = r.getClientRects();
        if (!rects.length) continue;
        const c = n.data[i];
        if (top !== null && rects[0].top > top + 2 && !soft(c) && !soft(prev)) bad.push(code.textContent);
        top = rects[0].top; prev = c;
      }
    }
  }
  return bad;
}"""

SVG_MIN_FONT_JS = r"""() => Math.min(...[...document.querySelectorAll('text, tspan')]
  .filter(t => t.textContent.trim()).map(t => parseFloat(getComputedStyle(t).fontSize)))"""


def listings(tab, url: str) -> list[dict]:
    tab.goto(url)
    return tab.evaluate(PRE_JS)


def diagram_text_px(browser, tab, url: str) -> list[tuple[str, float, float]]:
    """页面上每张 SVG 图：(文件名, 正文里最小的字号 px, 点开放大后最小的字号 px)。"""
    tab.goto(url)
    # 折叠的「深入」框里也有图：像读者那样先把框都展开，图才有大小、点得到
    tab.evaluate("() => document.querySelectorAll('.md-content details').forEach(d => { d.open = true; })")
    imgs = tab.evaluate("""() => [...document.querySelectorAll('.md-content img')]
        .filter(i => i.src.endsWith('.svg'))
        .map(i => ({src: i.src, w: i.getBoundingClientRect().width, nw: i.naturalWidth}))""")
    out = []
    for k, img in enumerate(imgs):
        svg = browser.new_page()
        svg.goto(img["src"])
        font = svg.evaluate(SVG_MIN_FONT_JS)
        svg.close()
        inline = font * img["w"] / img["nw"]
        zoomed = 0.0
        link = tab.locator(".md-content img[src$='.svg']").nth(k)
        if tab.evaluate("i => !!i.closest('a.nb-zoom')", link.element_handle()):
            link.click()
            big = tab.locator(".nb-zoom-overlay img")
            big.wait_for()
            zoomed = font * big.evaluate("i => i.getBoundingClientRect().width / i.naturalWidth")
            tab.keyboard.press("Escape")
            assert tab.locator(".nb-zoom-overlay").count() == 0, "Esc 没有关掉放大的图"
        out.append((img["src"].rsplit("/", 1)[-1], inline, zoomed))
    return out


def real_chapter_urls(real_site) -> list[str]:
    pages = sorted((real_site / "chapters").glob("*/index.html"))
    if not pages:
        pytest.skip("chapters/ 里还没有执行过的章节 notebook，没有章节页可量")
    return [p.as_uri() for p in pages]


def test_probe_listings_fit_at_1280(fake_site, tab):
    pres = listings(tab, (fake_site / "layout-probe" / "index.html").as_uri())
    assert [p["cols"] for p in pres] == [100, 100, 140]
    assert [p["scrolls"] for p in pres] == [False, False, True], \
        f"{LAYOUT_WIDTH} px 宽时 100 列的代码块应当放得下、140 列的应当横向滚动：{pres}"


def test_real_listings_fit_at_1280(real_site, tab):
    fit, scrolling = 0, []
    for url in real_chapter_urls(real_site):
        for p in listings(tab, url):
            if p["cols"] <= 100:
                fit += 1
                if p["scrolls"]:
                    scrolling.append((url.rsplit("/", 2)[-2], p["cols"], p["head"]))
    print(f"{LAYOUT_WIDTH} px：不超过 100 列的代码块 {fit} 个，横向滚动的 {len(scrolling)} 个")
    assert fit and not scrolling, f"不超过 100 列、却要横向滚动的代码块：{scrolling}"


def test_probe_table_code_not_broken_mid_word(fake_site, tab):
    tab.goto((fake_site / "layout-probe" / "index.html").as_uri())
    assert tab.evaluate(BROKEN_JS) == []


def test_real_table_code_not_broken_mid_word(real_site, tab):
    bad = {}
    for url in real_chapter_urls(real_site):
        tab.goto(url)
        if broken := tab.evaluate(BROKEN_JS):
            bad[url.rsplit("/", 2)[-2]] = broken
    assert not bad, f"表格里被从中间断开的标识符：{bad}"


def test_probe_diagram_opens_big_enough(browser, fake_site, tab):
    [(name, inline, zoomed)] = diagram_text_px(browser, tab, (fake_site / "layout-probe" / "index.html").as_uri())
    assert inline < 12 <= zoomed, (name, inline, zoomed)  # 正文里缩小了，点开以后够大


def test_real_diagram_text_at_least_12px(browser, real_site, tab):
    small = []
    for url in real_chapter_urls(real_site):
        for name, inline, zoomed in diagram_text_px(browser, tab, url):
            print(f"{name}: 正文里最小 {inline:.1f} px，点开 {zoomed:.1f} px")
            if max(inline, zoomed) < 12:
                small.append((name, round(inline, 1), round(zoomed, 1)))
    assert not small, f"正文里和点开以后，最小的字都不到 12 px 的图：{small}"


def test_home_shows_written_chapters(fake_site):
    """首页的「写作进度」从清单和执行过的 notebook 生成：假站点里只有第 0 章。"""
    home = (fake_site / "index.html").read_text(encoding="utf-8")
    chapters = load_manifest(REPO / "chapters" / "manifest.toml")
    assert f"写作进度：现在可读 1 章，共 {len(chapters)} 章" in home
    box = home.split("写作进度")[1].split("</div>")[0]
    assert 'href="chapters/ch00_tiny_engine/"' in box and "核心数据结构" not in box
    assert "阶段一 · 算得对" in box  # 还没动笔的阶段列在后面


def test_glossary_in_nav_with_ascii_anchors(fake_site):
    text = (REPO / "docs" / "glossary.md").read_text(encoding="utf-8")
    heads = re.findall(r"^### (.+)$", text, re.M)
    assert len(heads) >= 30
    bad = [h for h in heads if not re.search(r"\{ #[a-z0-9-]+ \}$", h)]
    assert not bad, f"术语表的条目都要有 ASCII 锚点 {{ #kv-pool }}：{bad}"
    ids = re.findall(r"\{ #([a-z0-9-]+) \}", text)
    assert len(ids) == len(set(ids))
    html = (fake_site / "glossary" / "index.html").read_text(encoding="utf-8")
    assert all(f'id="{i}"' in html for i in ids)
    home = (fake_site / "index.html").read_text(encoding="utf-8")
    assert 'href="glossary/"' in home  # 导航里有术语表
    # 「第 N 章引入」：有页面的章节链接过去（假站点里只有第 0 章），没有页面的不留坏链接
    assert '<a href="../chapters/ch00_tiny_engine/">第 0 章</a>' in html
    assert "第 4 章" in html and "ch04_kvcache" not in html


def test_broken_anchor_fails_strict_build(fake_site, tmp_path):
    """拼错的术语表锚点让 `mkdocs build --strict` 失败（mkdocs.yml 的 validation.anchors）。"""
    root = fake_site.parent
    bad = root / "docs" / "typo.md"
    bad.write_text("# 拼错\n\n[KV 池](glossary.md#kv-poool)\n", encoding="utf-8")
    try:
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "s")],
                              cwd=root, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    finally:
        bad.unlink()
    assert proc.returncode != 0 and "kv-poool" in proc.stdout + proc.stderr


def test_milestone_markers(fake_site):
    """阶段页（里程碑页）的标记：计数表从快照算，运行结果引用执行过的 notebook 里带标签的单元，检查清单可勾选。"""
    html = (fake_site / "milestone-probe" / "index.html").read_text(encoding="utf-8")
    chapters = [ch for ch in load_manifest(REPO / "chapters" / "manifest.toml")
                if ch.stage == "阶段一 · 算得对" and not ch.planned]
    from minibook.chapters import changes
    for ch in chapters:
        assert f"{ch.title}</td>" in html or f"{ch.title}</a></td>" in html
    last = changes(chapters[-1].number, load_manifest(REPO / "chapters" / "manifest.toml"))
    assert f"<td style=\"text-align: right;\">{last.count()}</td>" in html  # 到最后一章为止 minisgl/ 的文件数
    assert "The capital of France is Paris." in html and 'class="nb-output nb-stdout"' in html
    assert "第 6 章的 notebook 执行过以后" in html  # 假站点里没有第 6 章的 notebook：放一句说明，不报错
    assert 'type="checkbox"' in html and "task-list" in html


def test_tagged_outputs_errors(tmp_path):
    write_manifest(tmp_path)
    ch = load_manifest(tmp_path / "chapters" / "manifest.toml")[0]
    with pytest.raises(site.NotebookError, match="不存在或还没执行"):
        site.tagged_outputs(tmp_path, ch, "milestone")
    nbformat.write(fake_chapter(), tmp_path / "chapters" / f"{ch.name}.ipynb")
    with pytest.raises(site.NotebookError, match="没有带「milestone」标签"):
        site.tagged_outputs(tmp_path, ch, "milestone")


def test_tagged_outputs_quote_the_text_and_leave_the_plot_on_the_chapter_page(tmp_path):
    write_manifest(tmp_path)
    ch = load_manifest(tmp_path / "chapters" / "manifest.toml")[0]
    nb = fake_chapter()
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 16).decode()
    cell = nbformat.v4.new_code_cell("print('吞吐 68.5 token/s')\nplt.show()", metadata={"tags": ["milestone"]},
                                     execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="吞吐 68.5 token/s\n"),
                    nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})]
    nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "chapters" / f"{ch.name}.ipynb")
    quoted = site.tagged_outputs(tmp_path, ch, "milestone")
    assert "吞吐 68.5 token/s" in quoted and "<img" not in quoted and ".png" not in quoted
