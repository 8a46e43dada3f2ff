"""每一章：用 steps.py check 单独搭出这一章的树，跑它的 main 和它的测试；再确认 notebook 与源同步、
书页的组成部分齐全。同一件事只做一遍：同一次 pytest 里这一章的 notebook 已经跑了的 main 和测试，这里不再跑
（规则见 _ran_by_notebook_in_this_session）；前几章的测试只在最后一个修改了前几章文件的章的树里重跑一次，
在那里重跑的章，自己的树里只跑 notebook 跑了的那部分。"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from minibook import chapters as C

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import notebook  # noqa: E402  tools/notebook.py

WRITTEN = C.written_chapters()


def _rerun_chapter(chapters: list[C.Chapter]) -> C.Chapter | None:
    """前几章的测试在哪一章的树里重跑：最后一个修改了前几章文件的章。更晚的章只新建文件，弄不坏前几章的测试；
    这棵树里有到它为止每一章改过的文件，所以在这里把前面每一章的测试都重跑一遍（--rerun-all）。"""
    modifying = [c for c in chapters if c.number > 0 and C.modified_files(c.number)]
    return modifying[-1] if modifying else None


RERUN_IN = _rerun_chapter(WRITTEN)


def notebook_runs(ch: C.Chapter, sources: list[str] | None = None) -> tuple[bool, bool | str | tuple[str, ...]]:
    """这些 notebook 单元（默认：.ipynb 里 nbval 不跳过的代码单元）里的 run(...) 照原样跑了什么：
    （本章的 main 跑没跑，本章的测试：True = 整个文件，"表达式" = 只跑 -k 选中的，
    (测试名, ...) = 按 文件::测试名 挑的几个，False = 没跑）。
    只认最朴素的写法，认不出就当没跑——最多多跑一遍，不会少查。"""
    import ast
    import shlex

    import nbformat

    if sources is None:
        cells = [c for c in nbformat.read(ch.ipynb, as_version=4).cells if c.cell_type == "code"]
        sources = [c.source for c in cells if "NBVAL_SKIP" not in c.source
                   and "nbval-skip" not in c.metadata.get("tags", [])]
    main, tests = False, False
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run"
                    and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                continue
            words = shlex.split(node.args[0].value)
            main = main or words == ["python", ch.main]
            if words[:3] != ["python", "-m", "pytest"]:
                continue
            args, k = words[3:], None
            if "-k" in args:  # 至多一个 -k
                at = args.index("-k")
                k = args[at + 1] if at + 1 < len(args) else ""
                args = args[:at] + args[at + 2:]
                if "-k" in args or not _k_is_safe(k, ch):
                    continue
            # 只许这几个不改变“跑哪些测试”的选项；-x、-m、别的路径都不算
            args = " ".join(args).replace("-p no:cacheprovider", "").split()
            paths = sorted(w for w in args if w not in ("-q", "--color=no"))
            nodes = [w.partition("::")[2] for w in paths if w.startswith(ch.test_file + "::")]
            if k is None and paths and len(nodes) == len(paths) and all(nodes):
                if tests is False:  # 按测试名挑的几个：只记下“跑了一部分”（用不了 -k 拆分，见下面）
                    tests = tuple(nodes)
                continue
            if paths != [ch.test_file]:
                continue
            if k is None:
                tests = True
            elif tests is False or isinstance(tests, tuple):
                tests = k
    return main, tests


def _k_is_safe(expr: str, ch: C.Chapter) -> bool:
    """-k 按子串匹配测试名和它上层的目录名；notebook 在 build/chNN/ 里跑，steps.py check 在 build/check/chNN/ 里跑。
    表达式里的词碰到这些目录名，两边选中的就可能不同：这时不拆，整个文件照跑。"""
    words = set(re.findall(r"[\w.\[\]-]+", expr)) - {"and", "or", "not"}
    dirs = {"build", "check", "tests", ch.build_dir.name, REPO.name}
    return bool(words) and not any(w.lower() in d.lower() for w in words for d in dirs)


def _ran_by_notebook_in_this_session(ch: C.Chapter, request) -> tuple[bool, bool | str]:
    """规则：本次 pytest 选中了这一章 notebook 的某个单元（nbval 的测试项，-k、--deselect、只跑 tests/ 之后
    剩下的那些；nbval 不跳过），单元里 run("python <main>") 或 run("python -m pytest … <本章的测试文件>")，
    而且 notebook 用的 build/chNN 与快照一致：这个 main、这些测试这里不跑第二遍。run() 在命令失败时抛异常，
    那个单元、这次 pytest 就失败——不管它的输出比不比较（NBVAL_IGNORE_OUTPUT），main 和测试都照样检查过。
    notebook 的单元没被选中（单独跑 tests/、-k 只选了这个测试）时，这里照常全跑。"""
    sources = [item.cell.source for item in request.session.items
               if getattr(item, "path", None) == ch.ipynb and hasattr(item, "cell")
               and not getattr(item, "options", {}).get("skip")]
    if not sources or C.local_edits(ch.build_dir):
        return False, False
    return notebook_runs(ch, sources)


def _rerun_later_in_this_session(ch: C.Chapter, request) -> bool:
    """本次 pytest 选中了 RERUN_IN 那一章的检查（它在最后的树里重跑前面每一章的全部测试），而 ch 在它前面。"""
    if RERUN_IN is None or ch.number >= RERUN_IN.number:
        return False
    wanted = f"test_chapter_builds_runs_and_passes_its_tests[{RERUN_IN.name}]"
    return any(item.name == wanted for item in request.session.items)


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_chapter_builds_runs_and_passes_its_tests(ch, request):
    """每章跑 main 和自己的测试；本次 pytest 执行的 notebook 已经照原样跑过的，这里不跑第二遍。
    前几章的测试只在最后一个修改了前几章文件的章的树里重跑（全部重跑一遍就够了，省下 CI 的时间）；
    在那里重跑的章，自己的树里只跑 notebook 跑了的那部分（notebook 一个测试都没跑的章照常全跑）。
    读者的 steps.py check 仍然逐章全跑。"""
    rerun = RERUN_IN is not None and ch.number == RERUN_IN.number
    skip_main, tests = _ran_by_notebook_in_this_session(ch, request)
    # 这一章的测试在本次 pytest 里还会在最后的树里全部重跑：notebook 没跑的那部分不再在本章的树里跑一遍
    skip_tests = tests is True or (_rerun_later_in_this_session(ch, request) and tests is not False)
    if isinstance(tests, tuple) and not skip_tests:  # 按名字挑的几个拆不成 -k（子串会多配）：本章的树里全跑
        tests = False
    args = (["check", str(ch.number), "--rerun-all" if rerun else "--no-rerun"]
            + ["--skip-main"] * skip_main + ["--skip-own-tests"] * skip_tests
            + (["--skip-own-k", tests] if isinstance(tests, str) and not skip_tests else []))
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "steps.py"), *args],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "合计：1 章通过，0 章失败" in proc.stdout
    if skip_tests:
        assert "本章的跳过（--skip-own-tests）" in proc.stdout
    elif isinstance(tests, str):  # notebook 跑了 -k 选中的那些，这里跑其余的（可能一个不剩）
        assert re.search(r"测试：本章 (\d+ 通过|0 个)（-k 选中的跳过", proc.stdout), proc.stdout[-2000:]
    else:
        assert re.search(r"测试：本章 \d+ 通过", proc.stdout), proc.stdout[-2000:]
    if rerun:
        assert re.search(r"前几章 \d+ 通过.*--rerun-all", proc.stdout), proc.stdout[-2000:]


def test_notebooks_run_what_the_chapter_check_skips():
    """认得出 notebook 里照原样跑 main 和全部测试的单元（认不出就不跳过，所以这里只防“什么都认不出”）。"""
    seen = [notebook_runs(ch) for ch in WRITTEN]
    assert seen[0] == (True, True), "第 0 章的 notebook 照原样跑 main 和全部测试"
    assert sum(main for main, _ in seen) >= len(WRITTEN) // 2
    assert all(t is True or t is False or ch.number > 6 for ch, (_, t) in zip(WRITTEN, seen))


def test_tests_picked_by_node_id_count_as_a_share_only_of_this_chapters_file():
    ch = next(c for c in WRITTEN if c.number == 7)
    own = f'run("python -m pytest -q {ch.test_file}::test_a {ch.test_file}::test_b")'
    assert notebook_runs(ch, [own]) == (False, ("test_a", "test_b"))
    other = 'run("python -m pytest -q tests/test_ch08_cache_manager.py::test_a")'
    mixed = f'run("python -m pytest -q {ch.test_file}::test_a tests/test_ch08_cache_manager.py::test_b")'
    assert notebook_runs(ch, [other])[1] is False and notebook_runs(ch, [mixed])[1] is False
    assert notebook_runs(ch, [own, f'run("python -m pytest -q {ch.test_file}")'])[1] is True  # 整个文件优先


def test_k_expressions_that_could_match_directory_names_are_not_split():
    ch = WRITTEN[0]
    assert _k_is_safe("race or last_request", ch)
    assert not _k_is_safe("check", ch) and not _k_is_safe("not uild", ch) and not _k_is_safe("", ch)


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_notebook_is_executed_and_matches_its_source(ch):
    problem = notebook.out_of_sync(ch)
    assert problem is None, problem


@pytest.mark.parametrize("ch", WRITTEN, ids=[c.name for c in WRITTEN])
def test_notebook_follows_the_page_anatomy(ch):
    """每章都有书页的全部组成部分（标题之外的 11 个小节），顺序与 BOOK.md §4 一致。"""
    import jupytext

    nb = jupytext.read(ch.notebook)
    text = "\n".join(c.source for c in nb.cells)
    headings = [line for c in nb.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("## ")]
    parts = ["自测", "本章要回顾的文件", "这一步的 main", "运行", "与上游的差异", "测试",
             "怎么讲清楚", "练习", "小结"]
    positions = [next((i for i, h in enumerate(headings) if p in h), -1) for p in parts]
    missing = [p for p, pos in zip(parts, positions) if pos < 0]
    assert not missing, f"{ch.notebook.name} 缺少：{missing}"
    assert positions == sorted(positions), f"{ch.notebook.name} 的小节顺序不对：{headings}"
    assert text.lstrip().startswith("# ") or any(
        c.source.startswith("# 第") for c in nb.cells if c.cell_type == "markdown"), "缺少章标题"
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert f"setup({ch.number})" in sources
    for helper in ("header()", "tree()", "listing(", "run("):
        assert helper in sources, f"{ch.notebook.name} 没有用 {helper}"
    assert "??? " in text, "自测和练习的参考答案应当是可折叠的"


def test_markdown_only_sync_keeps_outputs_and_refuses_code_changes(tmp_path):
    """--markdown-only 只把文字抄进 .ipynb；代码单元一变就拒绝（输出必须来自真的执行）。"""
    import types

    import jupytext
    import nbformat

    from minibook import cli

    ch = WRITTEN[0]
    py, ipynb = tmp_path / ch.notebook.name, tmp_path / ch.ipynb.name
    py.write_text(ch.notebook.read_text(encoding="utf-8"), encoding="utf-8")
    ipynb.write_bytes(ch.ipynb.read_bytes())
    copy = types.SimpleNamespace(number=ch.number, notebook=py, ipynb=ipynb)  # 同一章，换到临时目录
    before = nbformat.read(ipynb, as_version=4)
    nb = jupytext.read(py)
    md = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown")
    nb.cells[md].source += "\n\n（改过的一句话）"
    jupytext.write(nb, py, fmt="py:percent")
    assert notebook.sync_markdown(copy) == 1
    after = nbformat.read(ipynb, as_version=4)
    assert after.cells[md].source.endswith("（改过的一句话）")
    assert [c.get("outputs") for c in after.cells] == [c.get("outputs") for c in before.cells]
    assert notebook.out_of_sync(copy) is None

    code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and i > md)
    nb.cells[code].metadata["tags"] = ["fold"]  # 标签只管页面的排法：照抄，输出不动
    jupytext.write(nb, py, fmt="py:percent")
    assert notebook.sync_markdown(copy) == 1
    after = nbformat.read(ipynb, as_version=4)
    assert after.cells[code].metadata["tags"] == ["fold"]
    assert [c.get("outputs") for c in after.cells] == [c.get("outputs") for c in before.cells]
    assert notebook.sync_markdown(copy) == 0

    nb.cells[code].source += "\nprint(1)"
    jupytext.write(nb, py, fmt="py:percent")
    with pytest.raises(cli.UserError, match="代码单元变了"):
        notebook.sync_markdown(copy)


def test_output_of_returns_what_run_printed_without_running_again(tmp_path, monkeypatch, capsys):
    """notebook 后面的单元要用 main 的输出时，output_of 给出前面 run() 的那一次，不再跑第二遍。"""
    from minibook import page

    monkeypatch.setitem(page._current, "tree", tmp_path)
    monkeypatch.setattr(page, "_outputs", {})
    counter = tmp_path / "runs.txt"
    command = f"echo x >> {counter}; wc -l < {counter}"
    page.run(command)
    assert capsys.readouterr().out.strip() == "1"
    assert page.output_of(command).strip() == "1" and counter.read_text().count("x") == 1
    with pytest.raises(RuntimeError, match="前面没有成功运行过"):
        page.output_of("python examples/never_ran.py")
    with pytest.raises(RuntimeError, match="命令失败"):
        page.run("exit 3")
    with pytest.raises(RuntimeError, match="前面没有成功运行过"):
        page.output_of("exit 3")
