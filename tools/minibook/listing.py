"""按文件与符号从源码里取代码，书页上的代码清单都从这里来，不手贴。"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path


class ListingError(Exception):
    pass


def _children(node: ast.AST) -> list[ast.AST]:
    return [n for n in getattr(node, "body", [])
            if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign,
                              ast.AnnAssign))]


def _name(node: ast.AST) -> str | None:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    return names[0] if names else None


def symbols(source: str) -> list[str]:
    """文件里可以摘录的符号：顶层的类、函数、赋值，以及类里的方法（Class.method）。"""
    found = []
    for node in _children(ast.parse(source)):
        name = _name(node)
        if name:
            found.append(name)
        if isinstance(node, ast.ClassDef):
            found += [f"{node.name}.{_name(m)}" for m in _children(node) if _name(m)]
    return found


def extract(path: str | Path, symbol: str | None = None) -> str:
    """返回文件全文，或某个符号（含装饰器）的源码；方法会去掉类的缩进。"""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ListingError(f"找不到文件 {path}") from None
    if symbol is None:
        return source.rstrip("\n")
    if path.suffix in C_SUFFIXES:
        return _extract_c(source, symbol, path)
    node: ast.AST = ast.parse(source)
    for part in symbol.split("."):
        match = [n for n in _children(node) if _name(n) == part]
        if not match:
            raise ListingError(f"{path} 里没有符号 {symbol}；可选的有：{', '.join(symbols(source))}")
        node = match[-1]
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = source.splitlines()[start - 1:node.end_lineno]
    return textwrap.dedent("\n".join(lines))


C_SUFFIXES = (".cpp", ".cu", ".h")


def _extract_c(source: str, name: str, path: Path) -> str:
    """C++ / CUDA 文件里的一个顶格定义的函数或 struct（连同它上面的 template 行和紧挨着的 // 注释），
    到顶格的 } 或 }; 为止。"""
    lines = source.splitlines()
    pattern = re.compile(rf"^(\S.*\b)?{re.escape(name)}(\(|\s*\{{)")
    starts = [i for i, line in enumerate(lines) if pattern.match(line) and not line.startswith("//")]
    if not starts:
        found = sorted({m.group(1) for line in lines if (m := re.match(r"^\S.*?\b(\w+)\(", line))
                        and not line.startswith(("//", "#"))})
        raise ListingError(f"{path} 里没有顶格定义的函数 {name}；可选的有：{', '.join(found)}")
    start = end = starts[0]
    if start > 0 and lines[start - 1].startswith("template"):
        start -= 1
    while start > 0 and lines[start - 1].startswith("//"):
        start -= 1
    while end < len(lines) and lines[end] not in ("}", "};"):
        end += 1
    return "\n".join(lines[start: end + 1])
