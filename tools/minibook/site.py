"""执行过的章节 notebook → mkdocs-material 的 Markdown 页面。

不经过 nbconvert 的 HTML：markdown 单元原样进入页面（admonition、折叠块、内容标签页都由
mkdocs-material 渲染），代码单元变成围栏代码块，输出按类型转换：

- 标签 `remove-cell`：整个单元不出现；`remove-input`：只留输出；`remove-output`：只留代码；
  `fold`：代码和输出缩进 4 格，收进上一个 markdown 单元结尾打开的折叠块（`??? note "……"`）；
- 代码开头的 `# NBVAL_...` 注释行去掉；整格都是 `!命令` 的单元显示成 bash 块 `$ 命令`；
- stdout → 带「输出」标题的 text 块，包在 `<div class="nb-output">` 里；stderr 非空时单独一块；
- `text/markdown` 原样插入（代码清单、文件树、计数都这样来）；`image/svg+xml` 内联；
  `image/png`/`image/jpeg` 写成页面旁边的文件再链接；其余 `text/plain` → text 块；
- 错误输出：直接失败（页面不能从带错误的 notebook 生成）。只有标了 `raises-exception`
  （或首行 `# NBVAL_RAISES_EXCEPTION`）的单元，错误才作为「预期的异常」显示出来。

每章页面顶上加一行来自章节清单的「阶段 · 第 N 章」；页面标题就是 notebook 的第一个一级标题。

命令行：`python -m minibook.site` 为 chapters/ 下所有执行过的 notebook 生成 docs/chapters/*.md
（mkdocs 的 hook 在每次构建前做同样的事）。
"""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from minibook.chapters import Chapter, load_manifest

REPO = Path(__file__).resolve().parents[2]
PAGES_DIR = Path("docs") / "chapters"  # 相对仓库根；整个目录都是生成的（git 忽略）

OUTPUT_TITLE = "输出"
STDERR_TITLE = "stderr"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NBVAL = re.compile(r"^\s*#\s*NBVAL_[A-Z_]+\s*$")
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$")


class NotebookError(Exception):
    """notebook 不能变成页面：有错误输出、没执行、没有标题……消息里说清楚是哪个单元。"""


@dataclass
class Page:
    """一章页面：Markdown 文本，以及要写在页面旁边的文件（文件名 → 字节）。"""

    title: str
    markdown: str
    files: dict[str, bytes] = field(default_factory=dict)


# ---------------------------------------------------------------- 小工具


def _text(value) -> str:
    """nbformat 里的多行字段可能是 str，也可能是 list[str]。"""
    return "".join(value) if isinstance(value, list) else str(value)


def clean_output_text(text: str) -> str:
    """去掉 ANSI 颜色码；进度条用的 \\r 只保留每行最后一次重画的内容；去掉末尾空白行。"""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    lines = [line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def fence(body: str, info: str) -> str:
    """围栏代码块；围栏比正文里最长的一串反引号还长，内容里有 ``` 也不会断。"""
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def output_block(body: str, *, title: str = OUTPUT_TITLE, kind: str = "stdout") -> str:
    """一块输出：带标题的 text 代码块，外面包一层 nb-output，CSS 让它和代码区分开。"""
    info = f'text title="{title}"'
    return f'<div class="nb-output nb-{kind}" markdown>\n\n{fence(body, info)}\n\n</div>'


def notebook_title(nb) -> str:
    """notebook 第一个 markdown 单元里的第一个一级标题。"""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        in_fence = False
        for line in _text(cell.source).splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                in_fence = not in_fence
            m = None if in_fence else _H1.match(line)
            if m:
                return m.group(1)
    raise NotebookError("notebook 里没有一级标题（第一个 markdown 单元应当以 `# 标题` 开头）")


def is_executed(nb) -> bool:
    """所有非空代码单元都有执行计数，才算执行过。"""
    code = [c for c in nb.cells if c.cell_type == "code" and _text(c.source).strip()]
    return bool(code) and all(c.get("execution_count") is not None for c in code)


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _strip_nbval(source: str) -> tuple[str, bool]:
    """去掉开头的 `# NBVAL_...` 注释行；返回 (代码, 是否声明了预期异常)。"""
    lines = source.splitlines()
    raises = False
    while lines and _NBVAL.match(lines[0]):
        raises |= "NBVAL_RAISES_EXCEPTION" in lines[0]
        lines.pop(0)
    return "\n".join(lines).strip("\n"), raises


# ---------------------------------------------------------------- 单元 → Markdown


def _render_input(source: str) -> str:
    lines = [line for line in source.splitlines() if line.strip()]
    if lines and all(line.lstrip().startswith("!") for line in lines):
        return fence("\n".join("$ " + line.lstrip()[1:].strip() for line in lines), "bash")
    return fence(source, "python")


def _merge_streams(outputs) -> list:
    """相邻的同名 stream 输出合成一个（内核会把一次打印拆成好几段）。"""
    merged: list = []
    for out in outputs:
        if (out.output_type == "stream" and merged and merged[-1].output_type == "stream"
                and merged[-1].name == out.name):
            merged[-1] = nbformat.from_dict({**merged[-1], "text": _text(merged[-1].text) + _text(out.text)})
        else:
            merged.append(out)
    return merged


def _clean_svg(svg: str) -> str:
    svg = re.sub(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<!--.*?-->", "", svg, flags=re.S)
    # 原始 HTML 块里不能有空行，否则 Markdown 会把它拆开
    return "\n".join(line for line in svg.splitlines() if line.strip())


def _render_output(out, *, index: int, image_name: str, files: dict[str, bytes]) -> str | None:
    kind = out.output_type
    if kind == "stream":
        text = clean_output_text(_text(out.text))
        if not text.strip():
            return None
        if out.name == "stderr":
            return output_block(text, title=STDERR_TITLE, kind="stderr")
        return output_block(text)
    if kind == "error":  # 只有声明了预期异常的单元会走到这里
        trace = clean_output_text("\n".join(out.get("traceback", []))) or f"{out.ename}: {out.evalue}"
        return output_block(trace, title=f"预期的异常：{out.ename}", kind="error")
    data = out.get("data", {})
    if "text/markdown" in data:
        return _text(data["text/markdown"]).strip("\n")
    if "image/svg+xml" in data:
        return f'<div class="nb-output nb-svg">\n{_clean_svg(_text(data["image/svg+xml"]))}\n</div>'
    for mime, ext in (("image/png", "png"), ("image/jpeg", "jpg")):
        if mime in data:
            name = f"{image_name}.{ext}"
            files[name] = base64.b64decode(_text(data[mime]))
            return f"![第 {index} 个单元的输出图像]({name}){{ .nb-image }}"
    if "text/plain" in data:
        text = clean_output_text(_text(data["text/plain"]))
        return output_block(text, kind="result") if text.strip() else None
    return None  # 只有 HTML / JS / 小部件之类的富输出：页面上不显示


def _indent(block: str) -> str:
    return "\n".join("    " + line if line.strip() else "" for line in block.split("\n"))


def render(nb, stem: str, chapter: Chapter | None = None, source_hint: str | None = None) -> Page:
    """把一个执行过的 notebook 变成页面。stem 是页面文件名（不带 .md），图像文件以它开头。"""
    title = notebook_title(nb)
    files: dict[str, bytes] = {}
    origin = source_hint or f"chapters/{stem}.ipynb"
    blocks = [f"<!-- 由 tools/minibook/site.py 从 {origin} 生成；不要手改，改 notebook 的源文件 -->"]
    if chapter is not None:
        blocks.append(f'<p class="nb-kicker">手写 mini-sglang · {html.escape(chapter.stage)} · 第 {chapter.number} 章</p>')
    for index, cell in enumerate(nb.cells, start=1):
        source = _text(cell.source)
        if cell.cell_type == "markdown":
            if source.strip():
                blocks.append(source.strip("\n"))
            continue
        if cell.cell_type != "code":
            continue  # raw 单元不进页面
        tags = _tags(cell)
        code, raises = _strip_nbval(source)
        outputs = _merge_streams(cell.get("outputs", []))
        for out in outputs:  # 隐藏的单元出了错也一样失败
            if out.output_type == "error" and not (raises or "raises-exception" in tags):
                raise NotebookError(f"{origin} 第 {index} 个单元有错误输出：{out.ename}: {out.evalue}")
        if "remove-cell" in tags:
            continue
        cell_blocks = []
        if "remove-input" not in tags and code.strip():
            cell_blocks.append(_render_input(code))
        if "remove-output" not in tags:
            for k, out in enumerate(outputs, start=1):
                block = _render_output(out, index=index, image_name=f"{stem}.out{index}-{k}", files=files)
                if block:
                    cell_blocks.append(block)
        if "fold" in tags:  # 收进上一个 markdown 单元结尾打开的折叠块（`??? note "……"`）：缩进 4 格
            cell_blocks = [_indent(block) for block in cell_blocks]
        blocks.extend(cell_blocks)
    return Page(title=title, markdown="\n\n".join(blocks) + "\n", files=files)


# ---------------------------------------------------------------- 整站


def notebook_path(root: Path, chapter: Chapter) -> Path:
    return Path(root) / "chapters" / f"{chapter.name}.ipynb"


def page_uri(chapter: Chapter) -> str:
    """页面相对 docs/ 的路径，导航和链接都用它。"""
    return f"chapters/{chapter.name}.md"


def _executed_notebook(path: Path):
    """读一个 notebook；没执行过返回 None。"""
    nb = nbformat.read(path, as_version=4)
    return nb if is_executed(nb) else None


def available_chapters(root: Path = REPO, chapters: list[Chapter] | None = None) -> list[Chapter]:
    """有执行过的 notebook、因而会有页面的章节（按章号）。"""
    chapters = chapters if chapters is not None else load_manifest(Path(root) / "chapters" / "manifest.toml")
    return [ch for ch in chapters
            if notebook_path(root, ch).is_file() and _executed_notebook(notebook_path(root, ch)) is not None]


@dataclass
class BuildReport:
    pages: list[Path] = field(default_factory=list)      # 写出（或本来就一样）的页面
    skipped: list[str] = field(default_factory=list)     # 没生成页面的 notebook 和原因
    removed: list[Path] = field(default_factory=list)    # 删掉的过期文件


def _write_if_changed(path: Path, data: bytes) -> None:
    """内容不变就不写：mkdocs serve 监视 docs/，每次都写会触发无穷的重建。"""
    if path.is_file() and path.read_bytes() == data:
        return
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def build_pages(root: Path = REPO, out_dir: Path | None = None) -> BuildReport:
    """为 chapters/ 下每个执行过的章节 notebook 写页面，删掉 out_dir 里其余（过期的）文件。

    清单里没有的 notebook、没执行过的 notebook 记进 report.skipped；带错误输出的 notebook 抛
    NotebookError。"""
    root = Path(root)
    out_dir = Path(out_dir) if out_dir is not None else root / PAGES_DIR
    chapters = load_manifest(root / "chapters" / "manifest.toml")
    known = {notebook_path(root, ch).name for ch in chapters}
    report = BuildReport()
    for path in sorted((root / "chapters").glob("*.ipynb")):
        if path.name not in known:
            report.skipped.append(f"chapters/{path.name} 不在 chapters/manifest.toml 里，没有生成页面")
    out_dir.mkdir(parents=True, exist_ok=True)
    keep: set[str] = set()
    for ch in chapters:
        path = notebook_path(root, ch)
        if not path.is_file():
            continue
        nb = _executed_notebook(path)
        if nb is None:
            report.skipped.append(f"chapters/{path.name} 还没执行（python tools/notebook.py {ch.number}），没有生成页面")
            continue
        page = render(nb, ch.name, ch, source_hint=f"chapters/{path.name}")
        for name, data in {f"{ch.name}.md": page.markdown.encode("utf-8"), **page.files}.items():
            _write_if_changed(out_dir / name, data)
            keep.add(name)
        report.pages.append(out_dir / f"{ch.name}.md")
    for stale in sorted(out_dir.iterdir()):
        if stale.name in keep or stale.name.startswith("."):
            continue
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
        report.removed.append(stale)
    return report


def main(argv: list[str] | None = None) -> int:
    report = build_pages()
    for page in report.pages:
        print(f"页面 {page.relative_to(REPO)}")
    for path in report.removed:
        print(f"删除过期文件 {path.relative_to(REPO)}")
    for reason in report.skipped:
        print(f"跳过：{reason}", file=sys.stderr)
    return 1 if report.skipped else 0


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------- 阶段页引用章节的真实运行


def tagged_outputs(root: Path, chapter: Chapter, tag: str) -> str:
    """第 N 章执行过的 notebook 里，带 `tag` 标签的代码单元的输出（不含代码），渲染成和章节页上一样的块。

    阶段页（里程碑页）用它引用一次真实运行的结果：运行发生在执行那一章的 notebook 时（在那一章的树里），
    输出随 notebook 提交、由 nbval 复查，阶段页上的数字因此和章节页上的是同一次运行。
    只引用文字输出：单元里画的图不上阶段页（图留在章节页上）。
    """
    path = notebook_path(root, chapter)
    nb = _executed_notebook(path) if path.is_file() else None
    if nb is None:
        raise NotebookError(f"{path.name} 不存在或还没执行，引用不了它带「{tag}」标签的单元的输出")
    blocks, files = [], {}
    for index, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code" or tag not in _tags(cell):
            continue
        for k, out in enumerate(_merge_streams(cell.get("outputs", [])), start=1):
            if out.output_type == "error":
                raise NotebookError(f"{path.name} 第 {index} 个单元（标签「{tag}」）有错误输出")
            images = len(files)
            block = _render_output(out, index=index, image_name=f"{chapter.name}.{tag}{index}-{k}", files=files)
            if block and len(files) == images:  # 阶段页只引用文字输出：同一个单元画的图留在章节页上
                blocks.append(block)
    if not blocks:
        raise NotebookError(f"{path.name} 里没有带「{tag}」标签、有输出的代码单元")
    return "\n\n".join(blocks)


# ---------------------------------------------------------------- 主线有多长


_CJK = re.compile(r"[\u4e00-\u9fff]")
_FOLD = re.compile(r"^(\s*)\?\?\?\+?\s")  # mkdocs-material 的折叠块：`??? note "标题"`，下面缩进的行都是它的


def main_line_chars(markdown: str) -> int:
    """页面主线上的汉字数：折叠块（`???`）以外的一切都算，正文、代码清单（连同注释）、输出、提示框。

    WRITING.md 的节奏：主线精简，深入的内容放进折叠块；种子章就是这样数的。折叠块的标题行算主线。"""
    count, fold_indent = 0, None
    for line in markdown.splitlines():
        if fold_indent is not None:
            indent = len(line) - len(line.lstrip())
            if not line.strip() or indent > fold_indent:
                continue  # 还在折叠块里（空行不结束它）
            fold_indent = None
        m = _FOLD.match(line)
        if m:
            fold_indent = len(m.group(1))
        count += len(_CJK.findall(line))
    return count
