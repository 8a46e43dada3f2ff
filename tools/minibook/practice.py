"""把判题练习变成网站页面：清单与题面都从 practice/ 读（复用 practice/judge.py 的解析），不另写一份。"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache

from minibook.chapters import REPO

PRACTICE = REPO / "practice"


@lru_cache(maxsize=1)
def judge():
    """practice/judge.py 是独立脚本（只用标准库）；这里按路径把它当模块加载。"""
    spec = importlib.util.spec_from_file_location("minibook_judge", PRACTICE / "judge.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass 需要能从 sys.modules 找到自己的模块
    spec.loader.exec_module(module)
    return module


def exercises():
    return judge().load_exercises()


def page_uri(ex) -> str:
    return f"practice/{ex.name}.md"


def chapter_exercises(chapter: int) -> list:
    return [ex for ex in exercises() if ex.chapter == chapter]


def exercise_page(ex) -> str:
    """一道题的页面：题面原样，提示折叠起来，最后是判题命令。"""
    statement, hints = judge().split_problem((ex.folder / "problem.md").read_text(encoding="utf-8"))
    parts = [statement.rstrip()]
    for title, body in hints:
        parts.append(f'??? tip "{title}"\n\n' + "\n".join(f"    {line}" if line else "" for line in body.splitlines()))
    parts.append("## 动手\n\n```bash\n"
                 f"python practice/judge.py start {ex.number}   # 起始代码拷进 practice/workspace/{ex.name}.py\n"
                 f"python practice/judge.py test {ex.number}    # 判题\n"
                 f"python practice/judge.py hint {ex.number}    # 卡住了，看下一条提示\n```")
    return "\n\n".join(parts) + "\n"


def table(items: list, link_prefix: str = "") -> str:
    """练习表：编号、题目（链到题目页）、章节、难度。link_prefix 是从当前页面到 docs/ 根的相对前缀。"""
    rows = ["| 编号 | 题目 | 章节 | 难度 |", "| --- | --- | --- | --- |"]
    for ex in items:
        rows.append(f"| {ex.code} | [{ex.title}]({link_prefix}{page_uri(ex)}) | 第 {ex.chapter} 章 | {ex.difficulty} |")
    return "\n".join(rows)


def index_page() -> str:
    return ("# 练习\n\n每道题都在本地判：`python practice/judge.py` 列出全部题目和进度，`start N` 拿到起始代码，"
            "`test N` 判题，`hint N` 一条条看提示，`watch` 保存即判。评测在随机输入上与参考实现逐项比较，"
            "删掉代码骗不过去。\n\n" + table(exercises(), link_prefix="../") + "\n")
