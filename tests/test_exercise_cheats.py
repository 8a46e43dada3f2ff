"""判题练习的“作弊答案”：每道题的 practice/NNN_slug/cheats/*.py 都必须被评测判成“没通过”。

BOOK.md 的坑：只检查“能跑”的测试，删掉代码也能过。我们试过的作弊答案都留在各题自己的 cheats/ 里，
一个文件一个，开头几行注释是它的说明：

    # 作弊：这个作弊做了什么
    # 为什么必须判错：……
    # 判词里要有：某个字样          （可选：不光要判错，还要因为对的理由判错；几种说法用“｜”隔开）
    # 写法：接在这道题的 solution.py 后面   （可选：没有这一行时，文件本身就是完整的答案）

practice/cheats/ 里的是“通用作弊”：执行 solution.py、改写 test.py 的 run、自己写结论文件、读评测进程的
内存——它们不针对哪一道题，所以对 COVERING 里的每一道题都评一遍：这几道题合起来走遍了评测的每一条路
（新起的解释器和预热模板、只用标准库和要 torch、stage 驱动、几个学习者进程、asyncio）。

评测走的是学习者用的同一条路：minibook.judging.run_test（子进程、口令、随机种子都在里面）。
另一条能推广到每道题的检查：参考答案里每一个公开的函数，单独换成 `raise NotImplementedError`，
测试都必须判“未通过”——测试没有调用到的函数，写成什么样都能过。
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from minibook import judging

ROOT = Path(__file__).resolve().parents[1]
PRACTICE = ROOT / "practice"
EXERCISES = {ex.name: ex for ex in judging.load_exercises()}
CHEAT_FILES = sorted(PRACTICE.glob("*/cheats/*.py"))
UNIVERSAL = sorted((PRACTICE / "cheats").glob("*.py"))
COVERING = ["001_causal_attention", "004_batch_positions", "021_fcfs_admission", "023_token_pool_indices",
            "027_radix_match_insert", "035_cpu_stream", "040_stop_holdback", "043_count_agreement",
            "044_late_subscriber", "047_reply_router"]
APPENDED = "接在这道题的 solution.py 后面"


def header(path: Path) -> dict[str, str]:
    """文件开头连续的 “# 键：值” 注释行。"""
    fields = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line.lstrip("# ").partition("：")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def cheat_source(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if header(path).get("写法", "").startswith(APPENDED):
        solution = (path.parent.parent / "solution.py").read_text(encoding="utf-8")
        return solution + "\n\n# ---- 作弊 ----\n" + text
    return text


def cheat_id(path: Path) -> str:
    if path.parent == PRACTICE / "cheats":
        return f"u-{path.stem}"
    return f"{path.parent.parent.name[:3]}-{path.stem}"


def test_there_are_cheats_and_every_exercise_has_one():
    assert len(CHEAT_FILES) >= 150
    covered = {p.parent.parent.name for p in CHEAT_FILES}
    assert set(EXERCISES) <= covered, f"没有作弊答案的练习：{sorted(set(EXERCISES) - covered)}"


@pytest.mark.parametrize("path", CHEAT_FILES + UNIVERSAL, ids=cheat_id)
def test_cheat_file_says_why_it_must_fail(path):
    fields = header(path)
    assert fields.get("作弊"), f"{path}：开头要有一行 “# 作弊：……”"
    assert fields.get("为什么必须判错"), f"{path}：开头要有一行 “# 为什么必须判错：……”"
    assert fields.get("写法", APPENDED).startswith(APPENDED), f"{path}：“写法”只能是「{APPENDED}」"
    why = fields["为什么必须判错"]
    assert fields["作弊"] not in why and "只在测试没查到的地方才" not in why, (
        f"{path}：“为什么必须判错”不能只是把“作弊”那一行再说一遍：要写出题目要求的哪一点被它跳过或做错了、"
        "在什么输入上会错")


def test_the_covering_exercises_take_every_path_of_the_judge():
    covering = [EXERCISES[name] for name in COVERING]
    assert UNIVERSAL and not any(p.stem.startswith("u") for p in CHEAT_FILES)  # 通用作弊只放在一个地方
    assert {judging._uses_torch(ex) for ex in covering} == {True, False}
    tests = {ex.name: ex.file("test.py").read_text(encoding="utf-8") for ex in covering}
    for helper in ("stage(", "more_processes", "asyncio"):
        assert any(helper in text for text in tests.values()), helper


@pytest.mark.parametrize("path,exercise", [(p, name) for p in UNIVERSAL for name in COVERING],
                         ids=[f"u-{p.stem}-{name[:3]}" for p in UNIVERSAL for name in COVERING])
def test_universal_cheat_is_rejected(path, exercise, tmp_path):
    target = tmp_path / "answer.py"
    target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    verdict = judging.run_test(EXERCISES[exercise], target)
    assert verdict.kind != "passed", (
        f"{exercise} 的评测没有拒绝通用作弊「{header(path)['作弊']}」（{path.name}，JUDGE_SEED={verdict.seed}）")


@pytest.mark.parametrize("path", CHEAT_FILES, ids=cheat_id)
def test_cheat_is_rejected(path, tmp_path):
    ex = EXERCISES[path.parent.parent.name]
    fields = header(path)
    target = tmp_path / "answer.py"
    target.write_text(cheat_source(path), encoding="utf-8")
    verdict = judging.run_test(ex, target)
    assert verdict.kind != "passed", (
        f"{ex.name} 的评测没有拒绝作弊答案「{fields['作弊']}」（{path.name}，JUDGE_SEED={verdict.seed}）")
    expect = fields.get("判词里要有")
    if expect:  # 几种说法用“｜”隔开：随机输入不同，先撞上的那条检查可能不同
        assert verdict.kind == "failed" and any(word in verdict.message for word in expect.split("｜")), (
            f"「{fields['作弊']}」被拒绝了，但理由不对（结论 {verdict.kind}，判词里应当有「{expect}」，"
            f"JUDGE_SEED={verdict.seed}）：\n{verdict.message}\n{verdict.detail}")


# ---------------------------------------------------------------- 能推广到每道题的检查


def public_functions(ex: judging.Exercise) -> list[str]:
    tree = ast.parse(ex.file("solution.py").read_text(encoding="utf-8"))
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


STUBS = [(ex, fn) for ex in EXERCISES.values() for fn in public_functions(ex)]


@pytest.mark.parametrize("ex,function", STUBS, ids=[f"{e.code}-{f}" for e, f in STUBS])
def test_every_public_function_is_tested(ex, function, tmp_path):
    """参考答案里任何一个公开函数没写（raise NotImplementedError），测试都要判“未通过”。"""
    target = tmp_path / "answer.py"
    target.write_text(ex.file("solution.py").read_text(encoding="utf-8")
                      + f"\n\ndef {function}(*args, **kwargs):\n    raise NotImplementedError\n", encoding="utf-8")
    verdict = judging.run_test(ex, target)
    assert verdict.kind == "failed", (
        f"{ex.name}：{function} 换成 raise NotImplementedError 以后，测试的结论是 {verdict.kind}："
        "测试没有调用到它")
