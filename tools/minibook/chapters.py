"""章节清单、快照叠加、文件计数、文件树与 diff。

第 N 章的源码树 = 快照 0..N 依次叠加。这里的每个函数都只读 snapshots/ 与 chapters/manifest.toml，
只往 build/ 里写。
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .cli import UserError

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "chapters" / "manifest.toml"
SNAPSHOTS = REPO / "snapshots"
BUILD = REPO / "build"
STAMP = ".steps-stamp.json"  # 构建时写下每个文件的哈希，用来发现读者改过的文件
JUNK = {"__pycache__"}
PACKAGE = "minisgl"


class ChapterError(UserError):
    """给读者看的错误：一行中文，说清楚发生了什么、该怎么办。"""


@dataclass(frozen=True)
class EarlyFile:
    path: str
    explained_in: int


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str
    title: str
    stage: str
    planned: bool = False
    main: str = ""
    early: tuple[EarlyFile, ...] = ()

    @property
    def name(self) -> str:
        return f"ch{self.number:02d}_{self.slug}"

    @property
    def snapshot(self) -> Path:
        return SNAPSHOTS / self.name

    @property
    def notebook(self) -> Path:
        return REPO / "chapters" / f"{self.name}.py"

    @property
    def ipynb(self) -> Path:
        return REPO / "chapters" / f"{self.name}.ipynb"

    @property
    def test_file(self) -> str:
        return f"tests/test_{self.name}.py"

    @property
    def build_dir(self) -> Path:
        return BUILD / f"ch{self.number:02d}"


def load_manifest(path: Path | None = None) -> list[Chapter]:
    """读清单并检查：章号从 0 起连续递增，已写的章节有 main。"""
    path = path or MANIFEST
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ChapterError(f"找不到章节清单 {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ChapterError(f"章节清单 {path} 不是合法的 TOML：{e}") from None
    chapters = []
    for i, entry in enumerate(raw.get("chapter", [])):
        try:
            early = tuple(EarlyFile(e["path"], int(e["explained_in"])) for e in entry.get("early", []))
            ch = Chapter(number=int(entry["number"]), slug=entry["slug"], title=entry["title"],
                         stage=entry["stage"], planned=bool(entry.get("planned", False)),
                         main=entry.get("main", ""), early=early)
        except (KeyError, TypeError, ValueError) as e:
            raise ChapterError(f"章节清单第 {i + 1} 项缺少或写错了字段：{e}") from None
        if ch.number != i:
            raise ChapterError(f"章节清单第 {i + 1} 项的章号是 {ch.number}，应为 {i}（章号从 0 起连续）")
        if not ch.planned and not ch.main:
            raise ChapterError(f"第 {ch.number} 章没有写 main（examples/{ch.name}.py）")
        chapters.append(ch)
    if not chapters:
        raise ChapterError(f"章节清单 {path} 里没有章节")
    return chapters


def get_chapter(number: int | str, chapters: list[Chapter] | None = None) -> Chapter:
    """按章号取一章；章号不存在或还没写都给出明确的一行错误。"""
    chapters = chapters if chapters is not None else load_manifest()
    written = [c.number for c in chapters if not c.planned]
    hint = f"已写好的章节：{_ranges(written)}（python tools/steps.py list 查看全部）"
    try:
        n = int(str(number).removeprefix("ch"))
    except ValueError:
        raise ChapterError(f"「{number}」不是章号。{hint}") from None
    if not 0 <= n < len(chapters):
        raise ChapterError(f"没有第 {n} 章。{hint}")
    ch = chapters[n]
    if ch.planned:
        raise ChapterError(f"第 {n} 章「{ch.title}」还没写。{hint}")
    return ch


def written_chapters(chapters: list[Chapter] | None = None) -> list[Chapter]:
    chapters = chapters if chapters is not None else load_manifest()
    return [c for c in chapters if not c.planned]


def _ranges(nums: list[int]) -> str:
    if not nums:
        return "无"
    return f"{nums[0]}–{nums[-1]}" if nums == list(range(nums[0], nums[-1] + 1)) else "、".join(map(str, nums))


def _rel(path: Path) -> str:
    """报错信息里用相对仓库的路径（仓库外的路径原样显示）。"""
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


def _is_junk(rel: Path) -> bool:
    """运行产物和隐藏文件（.ruff_cache、.pytest_cache、构建记录……）不属于快照，也不算读者的改动。"""
    return any(part in JUNK or part.startswith(".") for part in rel.parts) or rel.suffix == ".pyc"


def snapshot_files(ch: Chapter) -> list[str]:
    """快照里的文件（相对路径，排好序）。快照目录缺失或缺 main / 测试都算坏快照。"""
    if not ch.snapshot.is_dir():
        raise ChapterError(f"第 {ch.number} 章的快照目录 {_rel(ch.snapshot)} 不存在")
    files = sorted(p.relative_to(ch.snapshot).as_posix() for p in ch.snapshot.rglob("*")
                   if p.is_file() and not _is_junk(p.relative_to(ch.snapshot)))
    for required in (ch.main, ch.test_file):
        if required not in files:
            raise ChapterError(f"第 {ch.number} 章的快照里缺少 {required}（应在 "
                               f"{_rel(ch.snapshot)}/{required}）")
    return files


def tree_sources(number: int, chapters: list[Chapter] | None = None) -> dict[str, Chapter]:
    """第 N 章源码树里的每个文件 → 它最后一次出现在哪一章的快照里。"""
    chapters = chapters if chapters is not None else load_manifest()
    target = get_chapter(number, chapters)
    sources: dict[str, Chapter] = {}
    for ch in written_chapters(chapters):
        if ch.number > target.number:
            break
        for rel in snapshot_files(ch):
            sources[rel] = ch
    return dict(sorted(sources.items()))


@dataclass(frozen=True)
class Changes:
    """一章相对上一章的变化。计数只数 minisgl 包里的文件，与书里每章开头的那行一致。"""
    files: dict[str, str]  # 路径 → "new" | "changed" | "early" | ""（不变）
    explained_in: dict[str, int]  # 提前引入的文件 → 讲解它的章
    explained_here: dict[str, int] = field(default_factory=dict)  # 本章讲解的、早先提前引入的文件 → 引入它的章

    def count(self, kind: str | None = None) -> int:
        pkg = {p: k for p, k in self.files.items() if p.startswith(PACKAGE + "/")}
        return len(pkg) if kind is None else sum(k == kind for k in pkg.values())

    def header(self) -> str:
        return (f"到这一章为止的文件：{self.count()} 个（新建 {self.count('new')}，"
                f"修改 {self.count('changed')}，提前引入 {self.count('early')}）")


def changes(number: int, chapters: list[Chapter] | None = None) -> Changes:
    chapters = chapters if chapters is not None else load_manifest()
    ch = get_chapter(number, chapters)
    sources = tree_sources(number, chapters)
    before = tree_sources(number - 1, chapters) if number > 0 else {}
    early = {e.path: e.explained_in for e in ch.early}
    for path in early:
        if sources.get(path) is not ch:
            raise ChapterError(f"清单说第 {number} 章提前引入 {path}，但这一章的快照里没有它")
    kinds = {}
    for path, src in sources.items():
        if src is not ch:
            kinds[path] = ""
        elif path in early:
            kinds[path] = "early"
        elif path in before:
            kinds[path] = "changed"
        else:
            kinds[path] = "new"
    explained_here = {e.path: c.number for c in chapters if c.number < number
                      for e in c.early if e.explained_in == number}
    return Changes(kinds, early, explained_here)


def unchanged_copies(number: int, chapters: list[Chapter] | None = None) -> list[str]:
    """快照里与上一章一字不差的文件：这样的"修改"什么也没教，是坏快照。"""
    if number == 0:
        return []
    before = tree_sources(number - 1, chapters)
    ch = get_chapter(number, chapters)
    return [rel for rel in snapshot_files(ch)
            if rel in before and (ch.snapshot / rel).read_bytes() == (before[rel].snapshot / rel).read_bytes()]


TEST_CONFIG = {"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"}


def modified_files(number: int, chapters: list[Chapter] | None = None) -> list[str]:
    """本章可能弄坏前几章测试的文件：前几章的树里已有、本章又写了一遍的文件（修改），
    以及新加的 pytest 配置（conftest.py 等，新文件里只有它们会改变别的测试怎么跑）。
    只新建普通文件的一章弄不坏前几章的测试。"""
    if number == 0:
        return []
    before = tree_sources(number - 1, chapters)
    ch = get_chapter(number, chapters)
    return [rel for rel in snapshot_files(ch) if rel in before or Path(rel).name in TEST_CONFIG]


def earlier_tests_to_rerun(number: int, chapters: list[Chapter] | None = None) -> list[Chapter]:
    """本章修改了前几章的文件时，要重跑哪几章的测试：从最早有这些文件的那一章起，到上一章为止。

    更早的章的树里还没有这些文件，它们的测试碰不到被改的代码，不必重跑。
    新加的 pytest 配置（conftest.py 等）影响所有测试，从第 0 章起。
    """
    chapters = chapters if chapters is not None else load_manifest()
    modified = modified_files(number, chapters)
    if not modified:
        return []
    first = number
    for ch in written_chapters(chapters):
        if ch.number >= number:
            break
        files = set(snapshot_files(ch))
        if any(rel in files or Path(rel).name in TEST_CONFIG for rel in modified):
            first = ch.number
            break
    return [ch for ch in written_chapters(chapters) if first <= ch.number < number]


# ---------------------------------------------------------------- 构建


def tree_env(tree: Path) -> dict[str, str]:
    """在一章的树里运行代码时要设的环境变量（steps.py 的子进程和 notebook 共用）。

    树本身在 PYTHONPATH 最前，书的辅助包 minibook（tools/）在后：没 pip install -e . 也能跑；
    库的警告和提示关掉，输出才稳定。
    """
    return {"PYTHONPATH": os.pathsep.join([str(tree), str(REPO / "tools")]), "PYTHONWARNINGS": "ignore",
            "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_edits(tree: Path) -> list[str]:
    """读者在构建出来的树里改过、加过或删过的文件（与构建时写下的哈希比较）。"""
    stamp = tree / STAMP
    if not stamp.is_file():
        return [] if not tree.exists() or not any(tree.iterdir()) else ["（没有构建记录，不是 steps.py 搭出来的目录）"]
    recorded: dict[str, str] = json.loads(stamp.read_text(encoding="utf-8"))
    present = {p.relative_to(tree).as_posix(): p for p in tree.rglob("*")
               if p.is_file() and not _is_junk(p.relative_to(tree))}
    edits = [rel for rel, p in present.items() if rel not in recorded or _digest(p) != recorded[rel]]
    edits += [rel for rel in recorded if rel not in present]
    return sorted(edits)


def build(number: int, dest: Path | None = None, force: bool = False,
          chapters: list[Chapter] | None = None) -> Path:
    """把快照 0..N 叠加成 build/chNN/。

    先在旁边的临时目录里搭好再换进来，所以中途失败或两个进程同时构建都不会留下半棵树；
    读者在树里改过的文件不会被悄悄覆盖，除非 force。
    """
    chapters = chapters if chapters is not None else load_manifest()
    ch = get_chapter(number, chapters)
    dest = dest or ch.build_dir
    sources = tree_sources(ch.number, chapters)
    if dest.exists() and not force:
        edits = local_edits(dest)
        if edits:
            shown = "、".join(edits[:5]) + (" 等" if len(edits) > 5 else "")
            raise ChapterError(f"{dest} 里有你改过的文件（{shown}）；先把它们复制到别处，"
                               f"或加 --force 重新搭建（会丢掉这些改动）")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        stamp = {}
        for rel, src in sources.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.snapshot / rel, target)
            stamp[rel] = _digest(target)
        (tmp / STAMP).write_text(json.dumps(stamp, indent=1, sort_keys=True), encoding="utf-8")
        if dest.exists():
            trash = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(dest, trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.replace(tmp, dest)
        except OSError:  # 另一个进程刚好先搭好了同一章：内容相同（构建是确定的），用它的
            if not (dest / STAMP).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


# ---------------------------------------------------------------- 文件树与 diff

MARKERS = {"new": "← 本章新建", "changed": "← 本章修改"}


def tree_text(number: int, chapters: list[Chapter] | None = None) -> str:
    """带标记的文件树：有改动的目录展开，没有改动的目录折叠成"（N 个文件，不变）"。"""
    ch_changes = changes(number, chapters)
    lines: list[str] = []

    def marker(path: str) -> str:
        kind = ch_changes.files[path]
        if kind == "early":
            return f"  ← 提前引入（第 {ch_changes.explained_in[path]} 章讲解）"
        if path in ch_changes.explained_here:
            since = f"第 {ch_changes.explained_here[path]} 章提前引入，本章讲解"
            return f"  {MARKERS[kind]}（{since}）" if kind else f"  ← {since}"
        return f"  {MARKERS[kind]}" if kind else ""

    def walk(prefix: str, indent: str) -> None:
        inside = [p for p in ch_changes.files if p.startswith(prefix)]
        files = sorted(p for p in inside if "/" not in p[len(prefix):])
        dirs = sorted({p[len(prefix):].split("/")[0] for p in inside if "/" in p[len(prefix):]})
        files.sort(key=lambda p: (p != prefix + "__init__.py", p))
        entries = [(path, False) for path in files] + [(prefix + d + "/", True) for d in dirs]
        for i, (path, is_dir) in enumerate(entries):
            last = i == len(entries) - 1
            branch = "└── " if last else "├── "  # 最后一项收尾，竖线不再往下延伸
            name = path[len(prefix):]
            if not is_dir:
                lines.append(f"{indent}{branch}{name}{marker(path)}")
                continue
            members = [p for p in inside if p.startswith(path)]
            if any(ch_changes.files[p] or p in ch_changes.explained_here for p in members):
                lines.append(f"{indent}{branch}{name}")
                walk(path, indent + ("    " if last else "│   "))
            else:
                lines.append(f"{indent}{branch}{name}  （{len(members)} 个文件，不变）")

    for top in sorted({p.split("/")[0] for p in ch_changes.files if "/" in p},
                      key=lambda t: (t != PACKAGE, t)):
        lines.append(f"{top}/")
        walk(top + "/", "")
    for path in sorted(p for p in ch_changes.files if "/" not in p):
        lines.append(f"{path}{marker(path)}")
    return "\n".join(lines)


def diff_text(number: int, chapters: list[Chapter] | None = None) -> str:
    """第 N 章相对第 N-1 章的统一 diff（新文件与 /dev/null 比较）。"""
    chapters = chapters if chapters is not None else load_manifest()
    ch = get_chapter(number, chapters)
    before = tree_sources(number - 1, chapters) if number > 0 else {}
    out: list[str] = []
    for rel in snapshot_files(ch):
        new = (ch.snapshot / rel).read_text(encoding="utf-8").splitlines(keepends=True)
        old = (before[rel].snapshot / rel).read_text(encoding="utf-8").splitlines(keepends=True) \
            if rel in before else []
        out.extend(difflib.unified_diff(old, new, f"a/{rel}" if rel in before else "/dev/null",
                                        f"b/{rel}"))
    return "".join(out)
