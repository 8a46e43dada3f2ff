"""把判题练习变成网站页面：清单与题面都从 practice/ 读（用 minibook.judging，和 practice/judge.py 同一份解析）。"""

from __future__ import annotations

import html
import json
from pathlib import Path

from minibook import pyodide
from minibook.judging import Exercise, UserError, load_exercises, read_problem

__all__ = ["UserError", "exercises", "chapter_exercises", "page_uri", "exercise_page", "browser_job",
           "table", "index_page"]


def exercises() -> list[Exercise]:
    return load_exercises()


def page_uri(ex: Exercise) -> str:
    return f"practice/{ex.name}.md"


def chapter_exercises(chapter: int) -> list[Exercise]:
    return [ex for ex in exercises() if ex.chapter == chapter]


def exercise_page(ex: Exercise, browser: bool = False) -> str:
    """一道题的页面：题面原样，提示折叠起来，然后是判题命令；只用标准库的题再加上浏览器里的编辑框，
    要 torch 的题说明为什么只能在本地做。

    browser：网站里有没有 Pyodide（没有就只放一段“怎么打开”的说明）。
    """
    statement, hints = read_problem(ex)
    parts = [statement.rstrip()]
    for title, body in hints:
        parts.append(f'??? tip "{title}"\n\n' + "\n".join(f"    {line}" if line else "" for line in body.splitlines()))
    parts.append("## 动手\n\n```bash\n"
                 f"python practice/judge.py start {ex.number}   # 起始代码拷进 practice/workspace/{ex.name}.py\n"
                 f"python practice/judge.py test {ex.number}    # 判题\n"
                 f"python practice/judge.py hint {ex.number}    # 卡住了，看下一条提示\n```")
    if not ex.stdlib_only:
        parts.append(local_only_note(ex))
    elif browser:
        parts.append(browser_section(ex))
    else:
        parts.append(browser_missing_note(ex))
    return "\n\n".join(parts) + "\n"


def local_only_note(ex: Exercise) -> str:
    why = ex.local_only_reason or (
        "它要用 PyTorch。网页上的评测跑在浏览器里的 Python（Pyodide）上，而 PyTorch 的核心是 C++ 写的"
        "原生扩展，没有能在浏览器里运行的版本，Pyodide 也就没有它")
    return ('!!! info "这道题只能在本地评测"\n\n'
            f"    {why.rstrip('。')}，所以这一页没有编辑框。"
            f"请在本地用上面的命令做（时间限制 {ex.time_limit:g} 秒）。")


# ---------------------------------------------------------------------------
# 浏览器里做题：页面里放一个编辑框，评测在 Web Worker 里的 Pyodide 上跑（docs/assets/practice-*.js）。
# 评测用的 test.py 和 judgekit.py 就是 practice/ 里的那两个文件，构建时原样嵌进页面，不另写一份；
# 在 Pyodide 里运行 test.py 的是 minibook/browser_judge.py，也原样嵌进去。
# 参考答案不放进网页：它只在本地 `judge.py solution N` 里给。
# ---------------------------------------------------------------------------

BROWSER_ROOT = "/home/pyodide/practice"  # Pyodide 虚拟文件系统里，按仓库 practice/ 的样子摆文件
BROWSER_JUDGE = Path(__file__).with_name("browser_judge.py")

EDITOR_STYLE = ("width:100%;min-height:28em;box-sizing:border-box;resize:vertical;padding:.8em;"
                "font-family:var(--md-code-font-family),monospace;font-size:.75rem;line-height:1.5;tab-size:4;"
                "color:var(--md-code-fg-color);background:var(--md-code-bg-color);"
                "border:1px solid var(--md-default-fg-color--lightest);border-radius:.2rem;white-space:pre;")


def browser_job(ex: Exercise) -> dict:
    """页面里嵌的评测材料：起始代码、test.py、judgekit.py（和它导入的 isolation.py）以及在 Pyodide 里运行它们的
    browser_judge.py（都按原样）。浏览器里没有子进程：worker 里有两个解释器，学习者的代码在只装了 isolation.py
    的那一个里，test.py 在另一个里（见 docs/assets/practice-worker.js）。"""
    return {
        "exercise": ex.name,
        "number": ex.number,
        "label": ex.label,
        "starter": ex.file("starter.py").read_text(encoding="utf-8"),
        "root": BROWSER_ROOT,
        "files": {
            "judgekit.py": (ex.folder.parent / "judgekit.py").read_text(encoding="utf-8"),
            "isolation.py": (ex.folder.parent / "isolation.py").read_text(encoding="utf-8"),  # judgekit 导入它
            f"{ex.name}/test.py": ex.file("test.py").read_text(encoding="utf-8"),
        },
        "test": f"{ex.name}/test.py",
        "target": f"workspace/{ex.name}.py",  # 和本地 judge.py start 的工作区文件同名
        "harness": BROWSER_JUDGE.read_text(encoding="utf-8"),
    }


def _script_json(data: dict) -> str:
    """放进 <script type="application/json"> 的 JSON：< > & 写成 \\u 转义，源码里的 </script> 不会提前结束它。"""
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def browser_section(ex: Exercise) -> str:
    runner = (
        f'<div class="practice-runner" data-timeout="{ex.time_limit:g}">\n'
        f'<textarea class="practice-editor" spellcheck="false" autocomplete="off" autocapitalize="off" '
        f'aria-label="{html.escape(ex.label)} 的代码" style="{EDITOR_STYLE}"></textarea>\n'
        '<p class="practice-buttons">'
        '<button type="button" class="md-button md-button--primary" data-action="run">运行测试</button> '
        '<button type="button" class="md-button" data-action="reset">重置为起始代码</button> '
        '<span class="practice-status" aria-live="polite"></span></p>\n'
        '<div class="practice-verdict" aria-live="polite"></div>\n'
        f'<script type="application/json" class="practice-data">{_script_json(browser_job(ex))}</script>\n'
        "</div>"
    )
    return ("## 在浏览器里做\n\n"
            "这道题只用标准库，可以直接在这里写、在这里评测：评测用的是和本地 `judge.py` **同一份** "
            "`test.py` 与 `judgekit.py`，跑在浏览器里的 Python（[Pyodide](https://pyodide.org/)）上，"
            f"时间限制 {ex.time_limit:g} 秒。你的代码只保存在这个浏览器里；参考答案不在网页上，"
            f"评测过之后用 `python practice/judge.py solution {ex.number}` 在本地看。"
            "编辑框里 Tab 键插入 4 个空格（先按 Esc 再按 Tab 可以离开编辑框）。\n\n"
            '<noscript>要在网页上评测需要打开 JavaScript；本地评测 <code>python practice/judge.py</code> 一直可用。</noscript>\n\n'
            + runner)


def browser_missing_note(ex: Exercise) -> str:
    return ('!!! note "在浏览器里做这道题"\n\n'
            "    这道题只用标准库，本来可以直接在这个页面上写代码、运行评测；但构建这个网站时没有取到"
            f"浏览器里的 Python（Pyodide）。在书的仓库里运行 `{pyodide.FETCH_HINT}`，"
            "再重新构建网站（`mkdocs build` 或 `mkdocs serve`）就有了。\n\n"
            f"    本地评测一直可用：`python practice/judge.py test {ex.number}`。")


def table(items: list[Exercise], link_prefix: str = "") -> str:
    """练习表：编号、题目（链到题目页）、章节、难度。link_prefix 是从当前页面到 docs/ 根的相对前缀。"""
    rows = ["| 编号 | 题目 | 章节 | 难度 |", "| --- | --- | --- | --- |"]
    for ex in items:
        rows.append(f"| {ex.code} | [{ex.title}]({link_prefix}{page_uri(ex)}) | 第 {ex.chapter} 章 | {ex.difficulty} |")
    return "\n".join(rows)


def index_page() -> str:
    return ("# 练习\n\n每道题都在本地判：`python practice/judge.py` 列出全部题目和进度，`start N` 拿到起始代码，"
            "`test N` 判题，`hint N` 一条条看提示，`watch` 保存即判。评测在随机输入上与参考实现逐项比较，"
            "删掉代码骗不过去。只用标准库的题还能直接在题目页上、在浏览器里做；要 PyTorch 的题只能在本地做"
            "（浏览器里的 Python 没有 PyTorch）。\n\n" + table(exercises(), link_prefix="../") + "\n")
