"""章节 notebook 里用的小工具：搭树、文件计数、文件树、代码清单、运行命令。

约定：notebook 的第一个代码单元是 `from minibook.page import *; setup(N)`。
stderr 的处理只在这里定一次：命令成功时只显示 stdout，失败时把 stderr 一起抛出来；
notebook 进程里的 warnings 一律关掉——库的新警告不应该让书页的输出变来变去。
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

from IPython.display import Markdown

from minibook import chapters as _chapters
from minibook.listing import extract

__all__ = ["setup", "header", "tree", "listing", "run", "output_of", "chapter_dir", "exercises", "pyplot"]

_current: dict = {}


def setup(number: int) -> None:
    """搭出第 N 章的树，切换进去，让 `import minisgl` 只能拿到这一章为止的代码。"""
    ch = _chapters.get_chapter(number)
    tree = _chapters.build(ch.number)
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    os.environ.update(_chapters.tree_env(tree))  # run() 启动的子进程也用这一套
    warnings.filterwarnings("ignore")
    _current.update(chapter=ch, tree=tree)  # 不返回路径：克隆的位置不同，输出也不该不同


def pyplot():
    """matplotlib.pyplot，配好中文字体和图的大小；notebook 里画完 plt.show()，图作为 PNG 输出进页面。

    中文字体用文泉驿微米黑（CI 和 README 的机器都装了 fonts-wqy-microhei），没有时退回 DejaVu Sans。
    """
    import matplotlib

    matplotlib.use("module://matplotlib_inline.backend_inline")
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "font.sans-serif": ["WenQuanYi Micro Hei", "Noto Sans CJK SC", "DejaVu Sans"],
        "axes.unicode_minus": False,  # 中文字体里没有 U+2212，负号用 ASCII 的 -
        "figure.figsize": (7.5, 3.6), "figure.dpi": 110, "savefig.dpi": 110,
        "axes.grid": True, "grid.alpha": 0.3,
    })
    return plt


def chapter_dir() -> Path:
    if "tree" not in _current:
        raise RuntimeError("先调用 setup(N)")
    return _current["tree"]


def header() -> Markdown:
    """本章开头那行计数，以及本章的 main 和测试。"""
    ch = _current["chapter"]
    text = _chapters.changes(ch.number).header()
    return Markdown(f"{text}\n\n本章的 main：`{ch.main}`；本章的测试：`{ch.test_file}`。")


def tree() -> Markdown:
    return Markdown(f"```text\n{_chapters.tree_text(_current['chapter'].number)}\n```")


def listing(path: str, symbol: str | None = None) -> Markdown:
    """从本章的树里取代码：listing("minisgl/core.py", "Req")。"""
    code = extract(chapter_dir() / path, symbol)
    caption = f"{path} · {symbol}" if symbol else path
    lang = "python" if path.endswith(".py") else "cpp" if path.endswith((".cpp", ".cu", ".h")) else "text"
    fence = "````" if "```" in code else "```"
    return Markdown(f'{fence}{lang} title="{caption}"\n{code}\n{fence}')


_outputs: dict[str, str] = {}


def run(command: str, timeout: float = 900) -> None:
    """在本章的树里运行一条命令并打印它的输出；失败就抛异常，让 notebook 也失败。
    输出记下来：后面的单元要用它（比如检查清单里的数字）时用 output_of(command)，不必再跑一遍。"""
    # ipykernel 设了 FORCE_COLOR 等变量，会让 pytest 之类往输出里写颜色码：在这里去掉
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    env["NO_COLOR"] = "1"
    proc = subprocess.run(command, shell=True, cwd=chapter_dir(), capture_output=True, text=True,
                          timeout=timeout, env=env)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        # 输出的末尾也放进异常：nbval 报失败时只给异常，不给单元已经打印的东西
        raise RuntimeError(f"命令失败（退出码 {proc.returncode}）：{command}\n"
                           f"--- 标准输出末尾 ---\n{proc.stdout[-4000:]}\n--- 标准错误末尾 ---\n{proc.stderr[-3000:]}")
    _outputs[command] = proc.stdout


def output_of(command: str) -> str:
    """这个 notebook 里前面 run(command) 成功时打印的输出（同一次运行，不重跑）。"""
    if command not in _outputs:
        raise RuntimeError(f"前面没有成功运行过 run({command!r})")
    return _outputs[command]


def exercises() -> Markdown:
    """本章的判题练习（从 practice/exercises.toml 生成，链接到网站上的题目页）。"""
    from minibook import practice

    items = practice.chapter_exercises(_current["chapter"].number)
    if not items:
        return Markdown("本章没有判题练习；`python practice/judge.py` 列出全书的练习。")
    return Markdown(practice.table(items, link_prefix="../"))
