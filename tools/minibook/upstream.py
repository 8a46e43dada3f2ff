"""上游 mini-sglang 的符号索引：每章“官方实现”一节引用的 文件 · 符号，在固定提交上的行号。

章节里写的是 `python/minisgl/core.py` · `Req`（第 28～68 行）这样的引用（只占一行的写“第 42 行”）；行号只有一个来源，
就是 upstream.json：它由 `index` 命令从上游仓库的那个提交里用 ast 算出来，`check` 核对每章
手写的行号与它一字不差。固定的提交也只写在 upstream.json 里（术语表的“上游”词条链到它）。

    python -m minibook.upstream index --git-dir DIR   重新生成 upstream.json（DIR 是上游仓库的 git 目录）
    python -m minibook.upstream check                 核对每章的引用与 upstream.json
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import chapters as C
from . import cli

REPO_NAME = "sgl-project/mini-sglang"
INDEX = Path(__file__).resolve().parent / "upstream.json"
GLOSSARY = C.REPO / "docs" / "glossary.md"
HEADING = "## 官方实现"
BEFORE = "## 与上游的差异"  # 官方实现紧跟在这一节后面
CITATION = re.compile(r"`(python/minisgl/[\w/]+\.py)` · `([A-Za-z_][\w.]*)`（第 (\d+)(?:～(\d+))? 行）")
PATH = re.compile(r"`python/minisgl/")


@dataclass(frozen=True)
class Citation:
    source: str  # 写这条引用的文件（相对仓库根）
    line: int
    path: str
    symbol: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return f"{self.path}::{self.symbol}"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def commit_url(commit: str) -> str:
    """上游在这个提交上的代码（书里的行号都指它）。"""
    return f"https://github.com/{REPO_NAME}/tree/{commit}"


# ---------------------------------------------------------------- 读章节


def _markdown_lines(text: str, fragment: bool = False) -> list[tuple[int, str | None]]:
    """jupytext 源的每一行：(行号, 去掉 "# " 的 markdown 文字)；不是 markdown 单元里的行记作 None。

    fragment：一段要插进某个 markdown 单元的行，从第一行起就是 markdown。
    """
    out: list[tuple[int, str | None]] = []
    in_markdown = fragment
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# %%"):
            in_markdown = "[markdown]" in line
            out.append((n, None))
        elif in_markdown and (line == "#" or line.startswith("# ")):
            out.append((n, line[2:]))
        else:
            out.append((n, None))
    return out


def headings(text: str, fragment: bool = False) -> list[tuple[int, str]]:
    """markdown 单元里的二级标题：(行号, 标题)。"""
    return [(n, s) for n, s in _markdown_lines(text, fragment) if s is not None and s.startswith("## ")]


def section(text: str, fragment: bool = False) -> list[tuple[int, str]] | None:
    """“## 官方实现”一节的正文行 (行号, 文字)，到下一个二级标题或单元结束为止；没有这一节时返回 None。"""
    lines = _markdown_lines(text, fragment)
    start = next((i for i, (_, s) in enumerate(lines) if s == HEADING), None)
    if start is None:
        return None
    body = []
    for n, s in lines[start + 1:]:
        if s is None or s.startswith("## "):
            break
        body.append((n, s))
    return body


def parse(text: str, source: str, fragment: bool = False) -> tuple[list[Citation], list[str]]:
    """一个章节源（或一段待插入的行，fragment）里的引用，以及格式上的问题。"""
    body = section(text, fragment)
    if body is None:
        return [], [f"{source} 没有“{HEADING}”一节"]
    found: list[Citation] = []
    problems: list[str] = []
    names = [h for _, h in headings(text, fragment)]
    if BEFORE in names and names.index(HEADING) != names.index(BEFORE) + 1:
        problems.append(f"{source}：“{HEADING}”应当紧跟在“{BEFORE}”后面")
    if not any(s.strip() for _, s in body):
        problems.append(f"{source}：“{HEADING}”一节是空的")
    for n, s in body:
        cited = [Citation(source, n, m[1], m[2], int(m[3]), int(m[4] or m[3])) for m in CITATION.finditer(s)]
        if s.startswith("- ") and not cited:
            problems.append(f"{source}:{n}：这一条没有引用上游的 `文件` · `符号`（第 a～b 行）")
        if len(PATH.findall(s)) != len(cited):
            problems.append(f"{source}:{n}：有的上游路径后面没有写成 · `符号`（第 a～b 行）")
        found += cited
    return found, problems


def chapter_sources() -> list[Path]:
    return [ch.notebook for ch in C.written_chapters()]


def collect(paths: Iterable[Path]) -> tuple[list[Citation], list[str]]:
    citations: list[Citation] = []
    problems: list[str] = []
    for path in paths:
        source = str(path.relative_to(C.REPO)) if path.is_relative_to(C.REPO) else str(path)
        found, bad = parse(path.read_text(encoding="utf-8"), source, fragment=path.suffix != ".py")
        citations += found
        problems += bad
    return citations, problems


# ---------------------------------------------------------------- 读上游


def _children(node: ast.AST) -> list[ast.AST]:
    return [n for n in getattr(node, "body", [])
            if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign))]


def _names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def symbol_range(source: str, symbol: str) -> tuple[int, int] | None:
    """符号（`Class`、`Class.method`、函数、模块级赋值）占的行，含装饰器；找不到时返回 None。

    与书里代码清单的取法相同：同名的定义取最后一个。
    """
    node: ast.AST = ast.parse(source)
    for part in symbol.split("."):
        match = [n for n in _children(node) if part in _names(n)]
        if not match:
            return None
        node = match[-1]
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno


def _git(git_dir: Path, *args: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise cli.UserError(f"git {' '.join(args)} 失败：{proc.stderr.strip()}")
    return proc.stdout


def build_index(git_dir: Path, commit: str, citations: Iterable[Citation]) -> dict:
    """在上游的这个提交里找出每个被引用的符号的行号。"""
    commit = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
    files: dict[str, str] = {}
    symbols: dict[str, list[int]] = {}
    for c in sorted(citations, key=lambda c: c.key):
        if c.key in symbols:
            continue
        if c.path not in files:
            files[c.path] = _git(git_dir, "show", f"{commit}:{c.path}")
        found = symbol_range(files[c.path], c.symbol)
        if found is None:
            raise cli.UserError(f"{c.where}：上游 {commit[:7]} 的 {c.path} 里没有符号 {c.symbol}")
        symbols[c.key] = list(found)
    return {"repo": REPO_NAME, "commit": commit, "symbols": symbols}


def load_index(path: Path = INDEX) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write_index(index: dict, path: Path = INDEX) -> None:
    """一个符号一行，改动时 diff 好读。"""
    rows = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(index["symbols"].items())]
    path.write_text(f'{{\n "repo": {json.dumps(index["repo"])},\n "commit": {json.dumps(index["commit"])},\n'
                    f' "symbols": {{\n' + ",\n".join(rows) + "\n }\n}\n", encoding="utf-8")


# ---------------------------------------------------------------- 核对


def check(index: dict, citations: Iterable[Citation]) -> list[str]:
    """每条引用都在索引里，行号与索引相同。"""
    problems = []
    for c in citations:
        want = index["symbols"].get(c.key)
        if want is None:
            problems.append(f"{c.where}：{c.key} 不在 {INDEX.name} 里（重新生成索引：python -m minibook.upstream index）")
        elif [c.start, c.end] != want:
            problems.append(f"{c.where}：{c.path} · {c.symbol} 写的是第 {c.start}～{c.end} 行，"
                            f"上游 {index['commit'][:7]} 上是第 {want[0]}～{want[1]} 行")
    return problems


def unused(index: dict, citations: Iterable[Citation]) -> list[str]:
    """索引只收书里引用的符号：没人引用的说明索引该重新生成了。"""
    cited = {c.key for c in citations}
    return [f"{INDEX.name} 里的 {key} 没有章节引用（重新生成索引：python -m minibook.upstream index）"
            for key in sorted(set(index["symbols"]) - cited)]


def check_glossary(index: dict, text: str) -> list[str]:
    """术语表的“上游”词条链到索引固定的那个提交。"""
    entry = text.split("### 上游 { #upstream }", 1)
    if len(entry) < 2:
        return ["docs/glossary.md 没有“上游”词条"]
    entry = entry[1].split("\n### ", 1)[0]
    if commit_url(index["commit"]) not in entry:
        return [f"docs/glossary.md 的“上游”词条没有链到 {commit_url(index['commit'])}"]
    return []


def problems(extra: Iterable[Path] = ()) -> list[str]:
    citations, bad = collect([*chapter_sources(), *extra])
    index = load_index()
    return (bad + check(index, citations) + unused(index, citations)
            + check_glossary(index, GLOSSARY.read_text(encoding="utf-8")))


# ---------------------------------------------------------------- 命令行


def cmd_index(args) -> int:
    citations, bad = collect([*chapter_sources(), *args.also])
    for p in bad:
        print(p)
    commit = args.commit or (load_index()["commit"] if INDEX.is_file() else "HEAD")
    index = build_index(Path(args.git_dir), commit, citations)
    write_index(index)
    print(f"写出 {INDEX.relative_to(C.REPO)}：{REPO_NAME} {index['commit'][:7]} 上的 {len(index['symbols'])} 个符号")
    return 1 if bad else 0


def cmd_check(args) -> int:
    found = problems(args.also)
    for p in found:
        print(p)
    print(f"{len(found)} 处不一致" if found else "每章的上游引用都与索引一致")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(prog="python -m minibook.upstream", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(title="命令", dest="command", required=True)
    p = sub.add_parser("index", help="从上游仓库重新生成 upstream.json")
    p.add_argument("--git-dir", required=True, help="上游仓库的 git 目录（裸仓库或 .git）")
    p.add_argument("--commit", help="固定到哪个提交；缺省沿用 upstream.json 里的提交，还没有索引时取 HEAD")
    p.add_argument("--also", nargs="*", type=Path, default=[], help="还没插进章节的“官方实现”一节（.md 文件，每行带 \"# \"）")
    p.set_defaults(func=cmd_index)
    p = sub.add_parser("check", help="核对每章的引用与 upstream.json")
    p.add_argument("--also", nargs="*", type=Path, default=[], help="还没插进章节的“官方实现”一节（.md 文件，每行带 \"# \"）")
    p.set_defaults(func=cmd_check)
    return cli.dispatch(parser, argv)


if __name__ == "__main__":
    cli.run(main)
