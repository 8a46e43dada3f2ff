#!/usr/bin/env python
"""执行章节 notebook：读 chapters/chNN_slug.py（jupytext 源），在这一章的树里执行，写出带输出的 .ipynb。"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

TOOLS = str(Path(__file__).resolve().parent)
sys.path.insert(0, TOOLS)
# notebook 内核是另一个进程：把 tools/ 放进 PYTHONPATH，没 pip install -e . 也能 import minibook
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)

import jupytext  # noqa: E402
import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

from minibook import chapters as C  # noqa: E402
from minibook import cli  # noqa: E402

PROG = "python tools/notebook.py"
EXAMPLES = f"""示例：
  {PROG} 1          执行第 1 章，写出 chapters/ch01_core.ipynb
  {PROG} 0 1        执行第 0、1 章
  {PROG} all        执行全部已写的章节
  {PROG} --check    只检查每个 .ipynb 的输入与 .py 源一致（不执行）
  {PROG} 4 --markdown-only   只改了第 4 章的文字：抄进 .ipynb，不重新执行"""

KERNEL_TIMEOUT = 1200


def cell_sources(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def out_of_sync(ch: C.Chapter) -> str | None:
    """.ipynb 的输入与 .py 源不一致时返回原因（文本源才是真的；时间戳不可信）。"""
    if not ch.notebook.is_file():
        return f"缺少 notebook 源 {ch.notebook.relative_to(C.REPO)}"
    if not ch.ipynb.is_file():
        return f"缺少执行过的 {ch.ipynb.relative_to(C.REPO)}（运行 python tools/notebook.py {ch.number}）"
    source = cell_sources(jupytext.read(ch.notebook))
    executed = nbformat.read(ch.ipynb, as_version=4)
    if source != cell_sources(executed):
        return f"{ch.ipynb.name} 的输入与 {ch.notebook.name} 不一致（运行 python tools/notebook.py {ch.number}）"
    code = [c for c in executed.cells if c.cell_type == "code"]
    if any(c.get("execution_count") is None for c in code):
        return f"{ch.ipynb.name} 有没执行过的代码单元"
    return None


def execute(ch: C.Chapter) -> float:
    nb = jupytext.read(ch.notebook)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
    for i, cell in enumerate(nb.cells):  # 固定的单元 id、不记执行时刻：重新执行只在输出变了时产生 diff
        cell.id = f"cell-{i:03d}"
    start = time.monotonic()
    client = NotebookClient(nb, timeout=KERNEL_TIMEOUT, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(ch.notebook.parent)}})
    client.execute()
    nbformat.write(nb, ch.ipynb)
    return time.monotonic() - start


def sync_markdown(ch: C.Chapter) -> int:
    """只把 .py 里改过的文字单元（和单元的标签）抄进 .ipynb，不重新执行；返回改了几个单元。

    只有代码单元一字不差、单元的顺序和类型都没变时才这样做：输出只来自代码单元，代码没变，输出就还是真的。
    """
    source = jupytext.read(ch.notebook)
    executed = nbformat.read(ch.ipynb, as_version=4)
    if [c.cell_type for c in source.cells] != [c.cell_type for c in executed.cells]:
        raise cli.UserError(f"{ch.notebook.name} 增删或挪动了单元：要重新执行（python tools/notebook.py {ch.number}）")
    changed = 0
    for new, old in zip(source.cells, executed.cells):
        same_text = new.source.strip() == old.source.strip()
        if not same_text and new.cell_type != "markdown":
            raise cli.UserError(f"{ch.notebook.name} 的代码单元变了：要重新执行（python tools/notebook.py {ch.number}）")
        tags = new.metadata.get("tags", [])
        same_tags = tags == old.metadata.get("tags", [])
        if same_text and same_tags:
            continue
        old.source = new.source
        old.metadata.pop("tags", None)  # 标签只管页面怎么排（折叠、隐藏输入），不影响输出
        if tags:
            old.metadata["tags"] = tags
        changed += 1
    nbformat.write(executed, ch.ipynb)
    return changed


def cmd_notebooks(args: argparse.Namespace) -> int:
    written = C.written_chapters()
    if not args.chapters and not args.check:  # 执行会重写 chapters/ 下提交过的 .ipynb：要读者明说
        raise cli.UserError("要写章号（例如 1）或 all：执行会重写 chapters/ 下的 .ipynb")
    picked = written if not args.chapters or args.chapters == ["all"] else \
        list(dict.fromkeys(C.get_chapter(n) for n in args.chapters))
    if args.check:
        problems = [p for p in map(out_of_sync, picked) if p]
        for p in problems:
            print(p)
        print("全部一致" if not problems else f"{len(problems)} 个 notebook 需要重新执行")
        return 1 if problems else 0
    if args.markdown_only:
        for ch in picked:
            print(f"{ch.ipynb.name}：抄过去 {sync_markdown(ch)} 个文字单元（没有重新执行）")
        return 0
    for ch in picked:
        print(f"执行第 {ch.number} 章 {ch.notebook.name} ……", flush=True)
        try:
            with cli.progress(f"  执行 {ch.notebook.name}"):
                seconds = execute(ch)
        except CellExecutionError as e:
            print(f"错误：notebook 有单元执行失败，没有写出 .ipynb：\n{str(e)[-3000:]}", file=sys.stderr)
            return 1
        print(f"  写出 {ch.ipynb.relative_to(C.REPO)}（{seconds:.0f} 秒）")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(prog=PROG, description="在章节自己的树里执行 notebook，写出带输出的 .ipynb。",
                                epilog=EXAMPLES)
    parser.add_argument("chapters", metavar="N", nargs="*", help="章号，或 all（全部已写的章节）；只有 --check 时可以不写")
    parser.add_argument("--check", action="store_true", help="只检查 .ipynb 的输入与 .py 源一致（不执行）")
    parser.add_argument("--markdown-only", action="store_true",
                        help="只改了文字单元时用：把文字抄进 .ipynb，不重新执行（代码单元变了就拒绝）")
    parser.set_defaults(func=cmd_notebooks)
    return cli.dispatch(parser, argv)


if __name__ == "__main__":
    cli.run(main)
