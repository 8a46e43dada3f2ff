"""把一章快照里的改动带进后面各章自己的副本：三方合并，有冲突就停下，一个文件也不写。

快照是完整副本：第 8 章的 scheduler.py 在第 10、11、14 章里各有一份。修第 8 章的那份时，
后面的副本要得到同一处修改，又要留住它们各自的改动。对后面每一份副本做一次三方合并：
基准是第 N 章那份文件在 git 里的版本（默认 HEAD），"他们"是第 N 章现在的版本，"我们"是后面那一章的副本。
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import chapters as C


@dataclass(frozen=True)
class Carried:
    target: Path  # 后面某一章快照里的副本
    source: Path  # 第 N 章快照里被改的文件
    text: bytes  # 合并之后的内容


def committed_version(path: Path, rev: str) -> bytes | None:
    """path 在 git 的 rev 里的内容；rev 里没有这个文件（新文件）时返回 None。"""
    try:
        out = subprocess.run(["git", "show", f"{rev}:./{path.name}"], cwd=path.parent,
                             capture_output=True, check=False)
    except FileNotFoundError:
        raise C.ChapterError("找不到 git：carry 要用 git 里的版本当三方合并的基准") from None
    if out.returncode != 0:
        message = out.stderr.decode(errors="replace")
        if "exists on disk, but not in" in message or "does not exist in" in message:
            return None
        raise C.ChapterError(f"git 读不出 {rev} 里的 {C._rel(path)}：{message.strip().splitlines()[-1]}")
    return out.stdout


def merge3(ours: bytes, base: bytes, theirs: bytes) -> tuple[bytes, int]:
    """git merge-file：返回合并结果和冲突的块数（0 表示干净地合上了）。"""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            p = Path(tmp) / name
            p.write_bytes(data)
            paths.append(str(p))
        out = subprocess.run(["git", "merge-file", "-p", "-L", "后面那一章", "-L", "原来", "-L", "这一章",
                              *paths], capture_output=True, check=False)
    if out.returncode < 0 or out.returncode > 127:
        raise C.ChapterError(f"git merge-file 出错：{out.stderr.decode(errors='replace').strip()}")
    return out.stdout, out.returncode


def plan(number: int, rev: str = "HEAD", chapters: list[C.Chapter] | None = None) -> list[Carried]:
    """算出要写的每个副本；有一处冲突就抛 ChapterError，说清楚是哪两份文件。"""
    chapters = chapters if chapters is not None else C.load_manifest()
    ch = C.get_chapter(number, chapters)
    later = [c for c in C.written_chapters(chapters) if c.number > ch.number]
    carried: list[Carried] = []
    for rel in C.snapshot_files(ch):
        source = ch.snapshot / rel
        new = source.read_bytes()
        old = committed_version(source, rev)
        if old is None or old == new:
            continue
        for other in later:
            target = other.snapshot / rel
            if not target.is_file():
                continue
            ours = target.read_bytes()
            merged, conflicts = merge3(ours, old, new)
            if conflicts:
                raise C.ChapterError(
                    f"{C._rel(source)} 的改动带不进 {C._rel(target)}：{conflicts} 处冲突"
                    f"（第 {other.number} 章改过同一段）；请手工修改那份副本，一个文件也没有写")
            if merged != ours:
                carried.append(Carried(target, source, merged))
    return carried


def carry(number: int, rev: str = "HEAD", chapters: list[C.Chapter] | None = None) -> list[Carried]:
    """先把全部合并算完（有冲突就什么也不写），再写进后面各章的副本。"""
    carried = plan(number, rev, chapters)
    for item in carried:
        item.target.write_bytes(item.text)
    return carried
