"""mkdocs 的 hook（mkdocs.yml 里 `hooks:` 引用它）：让 `mkdocs build` 一条命令生成整站。

- on_config：从 chapters/manifest.toml 生成导航——首页，然后每个阶段一节（阶段页作为这一节的
  索引页），节里是这个阶段已经有页面的章节。mkdocs.yml 里不写 nav。
  阶段页是 docs/stages/*/index.md 里 front matter 写了 `stage: 阶段名` 的页面；清单里的阶段
  没有阶段页时，这里临时生成一个只有章节表的页面。
- 练习：docs/practice/ 下的页面由 practice/ 的清单和题面生成（minibook.practice），导航末尾一节。
  只用标准库的题在页面上还能直接评测：on_config 准备 Pyodide（minibook.pyodide，缓存里没有就取一次），
  on_post_build 把它的运行时文件拷进 site/assets/pyodide/（不进 docs/，不进 git）；
  编辑框和评测由 docs/assets/practice-runner.js、practice-worker.js 完成。
- on_pre_build：把 chapters/ 下执行过的 notebook 转成 docs/chapters/*.md（minibook.site）。
- on_page_markdown：把页面里的标记换成从清单生成的表——
  `<!-- minibook:plan -->`（全书章节计划）和 `<!-- minibook:chapters -->`（本阶段的章节），
  还没有页面的章节写「待写」，不加链接。front matter 写了 `notebook: 路径` 的页面（阶段的里程碑页），
  `<!-- minibook:notebook -->` 换成那个执行过的 notebook 转出的 Markdown（与章节页同一个转换）。
"""

from __future__ import annotations

import logging
import os
import posixpath
from pathlib import Path

import nbformat
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File
from mkdocs.utils.meta import get_data

from minibook import practice, pyodide
from minibook import site as book
from minibook.chapters import Chapter, ChapterError, load_manifest

log = logging.getLogger("mkdocs.hooks.minibook")

STAGES_DIR = "stages"
PLAN_MARKER = "<!-- minibook:plan -->"
STAGE_MARKER = "<!-- minibook:chapters -->"
NOTEBOOK_MARKER = "<!-- minibook:notebook -->"
RUNNER_JS = "assets/practice-runner.js"  # 它旁边的 practice-worker.js 从 assets/pyodide/ 加载 Pyodide
PYODIDE_SITE_DIR = "assets/pyodide"

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


def nav_title(ch: Chapter) -> str:
    return f"第 {ch.number} 章 {ch.title}"


def _practice_section(config, nav: list, generated: dict[str, str]) -> Path | None:
    """练习：题目页由 practice/exercises.toml 与各题的 problem.md 生成，导航末尾一节。

    有只用标准库的题目时准备 Pyodide，让它们也能在浏览器里做；返回运行时目录（取不到就是 None）。
    """
    try:
        items = practice.exercises()
    except practice.judge().UserError as e:
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
        nav.append({stage: [index] + [{nav_title(ch): book.page_uri(ch)}
                                       for ch in members if ch.number in available]})
    runtime = _practice_section(config, nav, generated)
    config.nav = nav
    _state.update(chapters=chapters, available=available, stage_pages=stage_pages, generated=generated,
                  pyodide=runtime, root=root)

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


def notebook_section(page) -> str:
    """front matter 里 `notebook:` 指向的执行过的 notebook → Markdown（不能带图片输出）。"""
    rel = page.meta.get("notebook")
    if not rel:
        raise PluginError(f"{page.file.src_uri} 用了 {NOTEBOOK_MARKER}，但 front matter 里没有 notebook")
    path = _state["root"] / str(rel)
    nb = nbformat.read(path, as_version=4) if path.is_file() else None
    if nb is None or not book.is_executed(nb):
        raise PluginError(f"{page.file.src_uri} 要的 {rel} 不存在或还没执行")
    try:
        rendered = book.render(nb, path.stem, source_hint=str(rel))
    except book.NotebookError as e:
        raise PluginError(str(e)) from None
    if rendered.files:
        raise PluginError(f"{rel} 有图片输出：嵌进页面的 notebook 只能有文本和 Markdown 输出")
    return rendered.markdown


def on_page_markdown(markdown, page, config, files):
    if NOTEBOOK_MARKER in markdown:  # 先展开 notebook：它的文字里也可以有下面的标记
        markdown = markdown.replace(NOTEBOOK_MARKER, notebook_section(page))
    if PLAN_MARKER in markdown:
        markdown = markdown.replace(PLAN_MARKER, plan_table(page))
    if STAGE_MARKER in markdown:
        stage = page.meta.get("stage")
        if not stage:
            raise PluginError(f"{page.file.src_uri} 用了 {STAGE_MARKER}，但 front matter 里没有 stage")
        markdown = markdown.replace(STAGE_MARKER, stage_table(page, str(stage)))
    return markdown
