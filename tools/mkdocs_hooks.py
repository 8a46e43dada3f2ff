"""mkdocs 的 hook（mkdocs.yml 里 `hooks:` 引用它）：让 `mkdocs build` 一条命令生成整站。

- on_config：从 chapters/manifest.toml 生成导航——首页，然后每个阶段一节，节里是这个阶段已经有
  页面的章节；阶段页是验收页（用了 stage-stats）时排在这些章之后，否则作为这一节的索引页排在前面。
  mkdocs.yml 里不写 nav。
  阶段页是 docs/stages/*/index.md 里 front matter 写了 `stage: 阶段名` 的页面；清单里的阶段
  没有阶段页时，这里临时生成一个只有章节表的页面。
- 收尾的几页（docs/wrapup/：与 SGLang 的差距、大作业）在各阶段之后、术语表之前，写了才出现。
- 练习：docs/practice/ 下的页面由 practice/ 的清单和题面生成（minibook.practice），导航末尾一节。
  只用标准库的题在页面上还能直接评测：on_config 准备 Pyodide（minibook.pyodide，缓存里没有就取一次），
  on_post_build 把它的运行时文件拷进 site/assets/pyodide/（不进 docs/，不进 git）；
  编辑框和评测由 docs/assets/practice-runner.js、practice-worker.js 完成。
- on_pre_build：把 chapters/ 下执行过的 notebook 转成 docs/chapters/*.md（minibook.site）。
- on_page_markdown：把页面里的标记换成从清单生成的内容——
  `<!-- minibook:plan -->`（全书章节计划）、`<!-- minibook:chapters -->`（本阶段的章节）和
  `<!-- minibook:progress -->`（首页上「现在能读哪几章」的一段），还没有页面的章节写「待写」，不加链接；
  阶段页（里程碑页）还能用 `<!-- minibook:stage-stats -->`（这一阶段每章的文件计数、代码行、测试数，
  从快照算出来）和 `<!-- minibook:output N 标签 -->`（第 N 章执行过的 notebook 里带这个标签的单元的
  输出：同一次真实运行，不另外跑）。
- on_page_content：正文里的每张 SVG 图包进一个指向原图的链接（class="nb-zoom"），
  docs/assets/zoom.js 让它点一下在浮层里放大：正文列里缩小了的图，字也能看清。
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File
from mkdocs.utils.meta import get_data

from minibook import chapters as chapters_mod
from minibook import practice, pyodide
from minibook import site as book
from minibook.chapters import Chapter, ChapterError, load_manifest

log = logging.getLogger("mkdocs.hooks.minibook")

STAGES_DIR = "stages"
PLAN_MARKER = "<!-- minibook:plan -->"
STAGE_MARKER = "<!-- minibook:chapters -->"
RUNNER_JS = "assets/practice-runner.js"  # 它旁边的 practice-worker.js 从 assets/pyodide/ 加载 Pyodide
PYODIDE_SITE_DIR = "assets/pyodide"
ZOOM_JS = "assets/zoom.js"  # 点图放大的浮层
PROGRESS_MARKER = "<!-- minibook:progress -->"
STATS_MARKER = "<!-- minibook:stage-stats -->"
# <!-- minibook:output 6 milestone -->：第 6 章执行过的 notebook 里带 milestone 标签的单元的输出
OUTPUT_MARKER = re.compile(r"<!-- minibook:output (\d+) ([\w-]+) -->")
# 收尾的几页：手写的页面，导航里在各阶段之后、术语表之前；还没写的不出现
WRAPUP = [("与 SGLang 的差距", "wrapup/gap.md"), ("大作业", "wrapup/projects.md")]
GLOSSARY = "glossary.md"  # 术语表：手写的页面，导航里在各阶段之后、练习之前；章节页在术语第一次出现时链接到它的锚点

_state: dict = {}  # 本次构建：chapters, available (章号集合), stage_pages, generated


def _root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def _by_stage(chapters: list[Chapter]) -> dict[str, list[Chapter]]:
    """阶段 → 章节，保持清单里的先后顺序。"""
    stages: dict[str, list[Chapter]] = {}
    for ch in chapters:
        stages.setdefault(ch.stage, []).append(ch)
    return stages


def _stage_pages(docs_dir: Path) -> dict[str, str]:
    """docs/stages/*/index.md 里 front matter 的 `stage:` → 页面路径（相对 docs/）。"""
    pages = {}
    for path in sorted((docs_dir / STAGES_DIR).glob("*/index.md")):
        _, meta = get_data(path.read_text(encoding="utf-8"))
        if meta.get("stage"):
            pages[str(meta["stage"])] = path.relative_to(docs_dir).as_posix()
    return pages


def _is_milestone(path: Path) -> bool:
    """阶段页是不是验收页（里程碑页）：用了这一阶段各章的统计。"""
    return path.is_file() and STATS_MARKER in path.read_text(encoding="utf-8")


def nav_title(ch: Chapter) -> str:
    return f"第 {ch.number} 章 {ch.title}"


def _practice_section(config, nav: list, generated: dict[str, str]) -> Path | None:
    """练习：题目页由 practice/exercises.toml 与各题的 problem.md 生成，导航末尾一节。

    有只用标准库的题目时准备 Pyodide，让它们也能在浏览器里做；返回运行时目录（取不到就是 None）。
    """
    try:
        items = practice.exercises()
    except practice.UserError as e:
        raise PluginError(f"练习清单有误：{e}") from None
    runtime = None
    if any(ex.stdlib_only for ex in items):
        runtime = pyodide.ensure_pyodide(log=log.info)  # 取不到也不算错：页面上改放一段说明
        if runtime is not None:
            log.info(f"浏览器里的练习：Pyodide {pyodide.VERSION}（{runtime}）")
            if RUNNER_JS not in [str(js) for js in config.extra_javascript]:
                config.extra_javascript.append(RUNNER_JS)
    generated["practice/index.md"] = practice.index_page()
    for ex in items:
        generated[practice.page_uri(ex)] = practice.exercise_page(ex, browser=runtime is not None)
    nav.append({"练习": ["practice/index.md"] + [{ex.label: practice.page_uri(ex)} for ex in items]})
    return runtime


@event_priority(100)  # 先于 search 插件的 on_config：它要读 jieba 词典的路径
def on_config(config):
    root = _root(config)
    try:
        chapters = load_manifest(root / "chapters" / "manifest.toml")
    except ChapterError as e:
        raise PluginError(str(e)) from None
    available = {ch.number for ch in book.available_chapters(root, chapters)}
    stage_pages = _stage_pages(Path(config.docs_dir))
    generated: dict[str, str] = {}
    nav: list = [{"首页": "index.md"}]
    for i, (stage, members) in enumerate(_by_stage(chapters).items()):
        index = stage_pages.get(stage)
        if index is None:
            index = f"{STAGES_DIR}/stage-{i}/index.md"
            generated[index] = f"---\nstage: {stage}\n---\n\n# {stage}\n\n{STAGE_MARKER}\n"
            stage_pages[stage] = index
        pages = [{nav_title(ch): book.page_uri(ch)} for ch in members if ch.number in available]
        if pages and _is_milestone(Path(config.docs_dir) / index):
            # 验收页引用这一阶段每章的结果：排在这些章之后，读完第 6 章的"下一页"是第 7 章
            nav.append({stage: pages + [{f"验收：{stage}": index}]})
        else:
            nav.append({stage: [index] + pages})
    wrapup = [{title: uri} for title, uri in WRAPUP if (Path(config.docs_dir) / uri).is_file()]
    if wrapup:
        nav.append({"收尾": wrapup})
    nav.append({"术语表": GLOSSARY})
    runtime = _practice_section(config, nav, generated)
    config.nav = nav
    if ZOOM_JS not in [str(js) for js in config.extra_javascript]:
        config.extra_javascript.append(ZOOM_JS)
    _state.update(chapters=chapters, available=available, stage_pages=stage_pages, generated=generated,
                  pyodide=runtime)

    # mkdocs-material 的 search 把 jieba 词典路径当作相对当前目录；这里改成相对 mkdocs.yml
    for plugin in config.plugins.values():
        cfg = getattr(plugin, "config", None)
        for key in ("jieba_dict", "jieba_dict_user"):
            value = cfg.get(key) if hasattr(cfg, "get") else None
            if value and not os.path.isabs(value):
                cfg[key] = str(root / value)
    return config


def on_pre_build(config):
    root = _root(config)
    try:
        report = book.build_pages(root, Path(config.docs_dir) / "chapters")
    except (book.NotebookError, ChapterError) as e:
        raise PluginError(f"章节页面生成失败：{e}") from None
    for reason in report.skipped:
        log.warning(reason)
    log.info(f"章节页面：{len(report.pages)} 个（{', '.join(p.name for p in report.pages) or '还没有执行过的 notebook'}）")


def on_files(files, config):
    for uri, content in _state.get("generated", {}).items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_post_build(config):
    runtime = _state.get("pyodide")
    if runtime is not None:
        size = pyodide.copy_runtime(runtime, Path(config.site_dir) / PYODIDE_SITE_DIR)
        log.info(f"Pyodide 运行时拷进了 {PYODIDE_SITE_DIR}/（{size / 2**20:.1f} MB）")


def on_serve(server, config, builder):
    root = _root(config)
    server.watch(str(root / "chapters"))
    return server


def _link(page, target: str) -> str:
    return posixpath.relpath(target, posixpath.dirname(page.file.src_uri) or ".")


def _chapter_cell(page, ch: Chapter) -> str:
    if ch.number in _state["available"]:
        return f"[{ch.title}]({_link(page, book.page_uri(ch))})"
    return ch.title


def _status(ch: Chapter) -> str:
    return "可读" if ch.number in _state["available"] else "待写"


def plan_table(page) -> str:
    rows = ["| 阶段 | 章 | 内容 | 状态 |", "| --- | --- | --- | --- |"]
    for stage, members in _by_stage(_state["chapters"]).items():
        for k, ch in enumerate(members):
            stage_cell = f"[{stage}]({_link(page, _state['stage_pages'][stage])})" if k == 0 else ""
            rows.append(f"| {stage_cell} | 第 {ch.number} 章 | {_chapter_cell(page, ch)} | {_status(ch)} |")
    return "\n".join(rows)


def stage_table(page, stage: str) -> str:
    members = _by_stage(_state["chapters"]).get(stage)
    if not members:
        raise PluginError(f"{page.file.src_uri} 的 stage「{stage}」不在 chapters/manifest.toml 里")
    rows = ["| 章 | 内容 | 状态 |", "| --- | --- | --- |"]
    rows += [f"| 第 {ch.number} 章 | {_chapter_cell(page, ch)} | {_status(ch)} |" for ch in members]
    return "\n".join(rows)


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 3, 5] -> "第 0–3、5 章"。"""
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(f"{start}" if start == n else f"{start}–{n}")
            start = None
    return f"第 {'、'.join(parts)} 章"


def progress(page) -> str:
    """首页上的一段：现在可读的章节（有执行过的 notebook 的），按阶段列出，带链接；其余待写。"""
    chapters, available = _state["chapters"], _state["available"]
    ready = [ch for ch in chapters if ch.number in available]
    if not ready:
        return "!!! info \"写作进度\"\n\n    还没有写好的章节：下面的计划表里每一章都是「待写」。\n"
    lines = [f"!!! info \"写作进度：现在可读 {len(ready)} 章，共 {len(chapters)} 章\"", ""]
    for stage, members in _by_stage(chapters).items():
        done = [ch for ch in members if ch.number in available]
        if done:
            links = "、".join(_chapter_cell(page, ch) for ch in done)
            rest = len(members) - len(done)
            tail = f"（本阶段还有 {rest} 章待写）" if rest else ""
            lines.append(f"    - **{stage}**（{_ranges([ch.number for ch in done])}）：{links}{tail}")
    todo = [stage for stage, members in _by_stage(chapters).items() if not any(ch.number in available for ch in members)]
    if todo:
        lines += ["", f"    还没有动笔的阶段：{'、'.join(todo)}。"]
    return "\n".join(lines) + "\n"


def _tree_numbers(number: int) -> tuple[int, int]:
    """第 N 章的树里：minisgl/ 的非空代码行数，tests/ 里的测试函数个数。"""
    lines = tests = 0
    for rel, src in chapters_mod.tree_sources(number, _state["chapters"]).items():
        text = (src.snapshot / rel).read_text(encoding="utf-8", errors="replace")
        if rel.startswith("minisgl/") and rel.endswith(".py"):
            lines += sum(1 for line in text.splitlines() if line.strip())
        elif rel.startswith("tests/") and rel.endswith(".py"):
            tests += len(re.findall(r"^\s*def test_", text, re.M))
    return lines, tests


def stage_stats(page, stage: str) -> str:
    """阶段页上的表：这一阶段每一章新建、修改、提前引入了几个文件，到这一章为止 minisgl/ 的文件数、
    代码行和树里的测试数。全部从快照算出来。"""
    members = [ch for ch in _by_stage(_state["chapters"]).get(stage, []) if not ch.planned]
    if not members:
        raise PluginError(f"{page.file.src_uri} 用了 {STATS_MARKER}，但阶段「{stage}」还没有写好的章节")
    rows = ["| 章 | 新建 | 修改 | 提前引入 | minisgl/ 的文件 | minisgl/ 的代码行 | 树里的测试 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for ch in members:
        c = chapters_mod.changes(ch.number, _state["chapters"])
        lines, tests = _tree_numbers(ch.number)
        rows.append(f"| {_chapter_cell(page, ch)} | {c.count('new')} | {c.count('changed')} | {c.count('early')} "
                    f"| {c.count()} | {lines:,} | {tests} |")
    return "\n".join(rows)


def tagged_output(root: Path, number: int, tag: str) -> str:
    try:
        ch = next(ch for ch in _state["chapters"] if ch.number == number)
        return book.tagged_outputs(root, ch, tag)
    except StopIteration:
        raise PluginError(f"{OUTPUT_MARKER.pattern}：清单里没有第 {number} 章") from None
    except book.NotebookError as e:
        if not book.notebook_path(root, ch).is_file() or ch.number not in _state["available"]:
            # 那一章的 notebook 还没执行：页面照常生成，这里放一句说明（章节页这时也还没有）
            log.info(f"阶段页引用的输出暂缺：{e}")
            return (f'!!! note "这里是第 {number} 章的运行结果"\n\n'
                    f"    第 {number} 章的 notebook 执行过以后，这里显示它的真实输出。\n")
        raise PluginError(f"阶段页引用的输出：{e}") from None


def link_chapters(page, markdown: str) -> str:
    """术语表和收尾几页里的「第 N 章」：那一章已经有页面时链接过去（还没有页面的照原样，不留坏链接）。"""
    by_number = {ch.number: ch for ch in _state["chapters"]}

    def link(m: re.Match) -> str:
        ch = by_number.get(int(m.group(1)))
        if ch is None or ch.number not in _state["available"]:
            return m.group(0)
        return f"[{m.group(0)}]({_link(page, book.page_uri(ch))})"
    return re.sub(r"(?<!\[)第 (\d+) 章", link, markdown)


def _stage_of(page, marker: str) -> str:
    stage = page.meta.get("stage")
    if not stage:
        raise PluginError(f"{page.file.src_uri} 用了 {marker}，但 front matter 里没有 stage")
    return str(stage)


def on_page_markdown(markdown, page, config, files):
    if PLAN_MARKER in markdown:
        markdown = markdown.replace(PLAN_MARKER, plan_table(page))
    if STAGE_MARKER in markdown:
        markdown = markdown.replace(STAGE_MARKER, stage_table(page, _stage_of(page, STAGE_MARKER)))
    if PROGRESS_MARKER in markdown:
        markdown = markdown.replace(PROGRESS_MARKER, progress(page))
    if STATS_MARKER in markdown:
        markdown = markdown.replace(STATS_MARKER, stage_stats(page, _stage_of(page, STATS_MARKER)))
    if page.file.src_uri == GLOSSARY or page.file.src_uri in dict(WRAPUP).values():
        markdown = link_chapters(page, markdown)
    root = _root(config)
    markdown = OUTPUT_MARKER.sub(lambda m: tagged_output(root, int(m.group(1)), m.group(2)), markdown)
    return markdown


_SVG_IMG = re.compile(r'(<a\b[^>]*>\s*)?(<img\b[^>]*\bsrc="([^"]+\.svg)"[^>]*>)')


def zoomable(html: str) -> str:
    """每张还没被链接包住的 SVG 图，包进 <a class="nb-zoom" href="原图">。"""
    def wrap(m: re.Match) -> str:
        if m.group(1):  # 作者自己给图加了链接：不动
            return m.group(0)
        return f'<a class="nb-zoom" href="{m.group(3)}" title="点击放大">{m.group(2)}</a>'
    return _SVG_IMG.sub(wrap, html)


def on_page_content(html, page, config, files):
    return zoomable(html)
