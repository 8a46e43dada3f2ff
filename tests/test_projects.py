"""大作业的验收脚本（practice/projects/）：参考实现打在最后一章的树上能通过；原样的树说清缺什么；
跳过要点的结果过不了。

参考实现是 practice/projects/reference/<项目>.patch，打在最后一章的树上（git apply）。
每个项目的引擎只在子进程里真跑一遍（参考实现）；“跳过要点”的几种写法，是把这次真跑出的结果
照那种写法会有的样子改一处，再交给同一个评判函数——每一种都必须被判成未通过，判词说到点上。
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minibook import chapters as C

REPO = Path(__file__).resolve().parents[1]
PROJECTS = REPO / "practice" / "projects"
sys.path.insert(0, str(PROJECTS))

import accept  # noqa: E402  practice/projects/accept.py
from common import Fail  # noqa: E402

LAST = C.written_chapters()[-1]
SEED = 20261206  # 固定的种子：这里要的是可复现；读者每次验收的种子是随机的


@pytest.fixture(scope="module")
def base_tree(tmp_path_factory) -> Path:
    return C.build(LAST.number, dest=tmp_path_factory.mktemp("projects") / "base")


def _patched(base: Path, project: str, dest: Path) -> Path:
    shutil.copytree(base, dest)
    patch = PROJECTS / "reference" / f"{project}.patch"
    proc = subprocess.run(["git", "apply", "-p1", str(patch)], cwd=dest, capture_output=True, text=True)
    assert proc.returncode == 0, f"{patch.name} 打不上第 {LAST.number} 章的树：{proc.stderr}"
    return dest


@pytest.fixture(scope="module")
def reference_results(base_tree, tmp_path_factory) -> dict[str, dict]:
    """每个项目的参考实现在子进程里真跑一遍（和 accept.py 走同一条路），结果给下面的测试共用。"""
    results = {}
    for name, (module, _) in accept.PROJECTS.items():
        tree = _patched(base_tree, name, tmp_path_factory.mktemp(name) / "tree")
        results[name] = accept.run_child(module, tree, SEED, timeout=600)
    return results


def _judge(project: str, result: dict) -> list[str]:
    module = __import__(accept.PROJECTS[project][0])
    return module.judge(result, SEED)


@pytest.mark.parametrize("project", sorted(accept.PROJECTS))
def test_the_reference_passes(project, reference_results):
    lines = _judge(project, reference_results[project])
    assert len(lines) >= 2


def test_accept_cli_lists_projects_and_prints_the_verdict(reference_results, base_tree, monkeypatch, capsys):
    """不带参数列出项目；判词的两种结局：子进程交回参考实现的结果时“通过”、退出码 0，
    改坏一处时“未通过”、退出码 1，并给出重跑同样输入的命令。"""
    listing = subprocess.run([sys.executable, str(PROJECTS / "accept.py")], capture_output=True, text=True)
    assert listing.returncode == 0 and all(name in listing.stdout for name in accept.PROJECTS)
    monkeypatch.setenv("ACCEPT_SEED", str(SEED))
    result = reference_results["lpm"]
    monkeypatch.setattr(accept, "run_child", lambda *args: copy.deepcopy(result))
    assert accept.main(["lpm", "--tree", str(base_tree)]) == 0
    out = capsys.readouterr().out
    assert "通过：lpm" in out and f"ACCEPT_SEED={SEED}" in out
    broken = copy.deepcopy(result)
    broken["runs"]["lpm"]["prefill_tokens"] = broken["runs"]["fcfs"]["prefill_tokens"]
    monkeypatch.setattr(accept, "run_child", lambda *args: copy.deepcopy(broken))
    assert accept.main(["lpm", "--tree", str(base_tree)]) == 1
    out = capsys.readouterr().out
    assert "未通过：lpm 算了" in out and f"ACCEPT_SEED={SEED} python practice/projects/accept.py lpm" in out


@pytest.mark.parametrize("project, missing", [("json", "json_schema"), ("retract", "optimistic_admission"),
                                              ("lpm", "schedule_policy")])
def test_the_untouched_tree_fails_naming_what_is_missing(project, missing, base_tree):
    proc = subprocess.run([sys.executable, str(PROJECTS / "accept.py"), project, "--tree", str(base_tree)],
                          capture_output=True, text=True, env=dict(os.environ, ACCEPT_SEED=str(SEED)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "未通过：缺接口" in proc.stdout and missing in proc.stdout, proc.stdout


def test_no_tree_and_a_hanging_engine_are_clear_errors(tmp_path):
    proc = subprocess.run([sys.executable, str(PROJECTS / "accept.py"), "lpm", "--tree", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "没有 minisgl 包" in proc.stderr
    hanging = tmp_path / "hang"
    (hanging / "minisgl").mkdir(parents=True)
    (hanging / "minisgl" / "__init__.py").write_text("while True:\n    pass\n")
    proc = subprocess.run([sys.executable, str(PROJECTS / "accept.py"), "lpm", "--tree", str(hanging),
                           "--timeout", "5"], capture_output=True, text=True)
    assert proc.returncode == 1 and "5 秒还没跑完" in proc.stdout, proc.stdout


# ---------------------------------------------------------------- 跳过要点的结果

def _fails(project: str, result: dict, words: str) -> None:
    with pytest.raises(Fail) as e:
        _judge(project, result)
    assert words in str(e.value), str(e.value)


def test_json_rejects_post_hoc_repair_and_a_too_strict_mask(reference_results):
    from common import hf_logits, tokenizer
    from json_decoding import draw_cases

    ref = reference_results["json"]
    broken = copy.deepcopy(ref)
    broken["outputs"][0] = broken["outputs"][0][:-1]  # 少了收尾的 }：不是完整的文档
    _fails("json", broken, "不是合 schema 的紧凑 JSON")
    # 掩码收得太紧：第一步换成一个也合文法、但 HF 的 logit 更小的 token（例如只允许单字符的 token）
    tok = tokenizer()
    prompt, schema = draw_cases(SEED)[0]
    row = hf_logits(tok.encode(prompt))[-1]
    first = ref["outputs"][0][0]
    assert len(tok.decode([first])) > 1  # 参考实现第一步就用了多字符的 token（例如 '{"'）
    single = tok.convert_tokens_to_ids("{")
    assert row[single] < row[first]
    strict = copy.deepcopy(ref)
    strict["outputs"][0] = _regenerate_after(strict["outputs"][0], single, tok)
    _fails("json", strict, "掩码收得太紧")
    plain = copy.deepcopy(ref)
    plain["plain_alone"] = plain["plain_alone"][:-1] + [(plain["plain_alone"][-1] + 1) % len(tok)]
    _fails("json", plain, "没带约束的请求")
    bad = copy.deepcopy(ref)
    bad["bad"]["类型拼错"] = "收下了"
    _fails("json", bad, "类型拼错")
    apart = copy.deepcopy(ref)  # 带约束的和不带约束的从没进过同一批（比如分开跑）：第 3 条什么也没检验到
    apart["decode_batches"] = [[u for u in uids if u != 3] or [3] for uids in apart["decode_batches"]]
    _fails("json", apart, "从没和带约束的请求进同一个 decode 批")


def _regenerate_after(ids: list[int], first: int, tok) -> list[int]:
    """第一个 token 换成 first，后面的文本保持不变（按字符重新切成 token）：还是同一个 JSON。"""
    text = tok.decode(ids)
    assert text.startswith(tok.decode([first]))
    return [first] + tok.encode(text[len(tok.decode([first])):])


def test_retract_rejects_reserving_and_losing_tokens(reference_results):
    ref = reference_results["retract"]
    reserve = copy.deepcopy(ref)  # 只加了开关、还按最坏情况预留：同时 decode 的不超过上限
    for run in reserve["runs"]:
        run["batches"] = [[prefill, uids[:2]] for prefill, uids in run["batches"]]
    _fails("retract", reserve, "不是乐观接纳")
    never = copy.deepcopy(ref)  # 从没退回过：每个请求只在 prefill 里出现在 decode 之前
    for run in never["runs"]:
        seen: set[int] = set()
        kept = []
        for prefill, uids in run["batches"]:
            if prefill:
                uids = [u for u in uids if u not in seen]
            else:
                seen |= set(uids)
            kept.append([prefill, uids])
        run["batches"] = kept
    _fails("retract", never, "没有退回请求")
    lost = copy.deepcopy(ref)  # 退回时丢了在途的一个 token：后面全部错位
    out = lost["runs"][0]["outputs"]["5"]
    out[:] = out[:10] + out[11:] + [out[-1]]
    _fails("retract", lost, "和 HF 的贪心不同")
    twice = copy.deepcopy(ref)
    twice["runs"][1]["finished"]["3"] = [20, 48]  # 退回时把请求报成了结束
    _fails("retract", twice, "结束一次")
    # 退回后从原来的提示重算，再把重复生成的 token 藏起来（输出照样和 HF 相同：贪心是确定的）
    restart = copy.deepcopy(ref)
    run = restart["runs"][0]
    first = {}
    for i, (uid, ids) in enumerate(run["prefills"]):
        if uid in first:
            run["prefills"][i] = [uid, first[uid]]
        first.setdefault(uid, ids)
    _fails("retract", restart, "从原来的提示重新算起")
    wasted = copy.deepcopy(ref)  # 多进了几次前向：算出来的 token 丢掉了
    wasted["runs"][0]["batches"] += [[False, [7]]] * 3
    _fails("retract", wasted, "有 token 被算了又丢掉")
    bigger = copy.deepcopy(ref)  # 偷偷把池子放大
    bigger["runs"][0]["num_pages"] *= 4
    _fails("retract", bigger, "KV 池应当是")


def test_lpm_rejects_fcfs_under_another_name_and_a_wrong_policy_check(reference_results):
    ref = reference_results["lpm"]
    same = copy.deepcopy(ref)  # 只认了名字，顺序照旧：算的 token 和 fcfs 一样多
    same["runs"]["lpm"]["prefill_tokens"] = same["runs"]["fcfs"]["prefill_tokens"]
    _fails("lpm", same, "应当不到")
    typo = copy.deepcopy(ref)
    typo["bad_policy"] = "收下了"
    _fails("lpm", typo, "ValueError")
    stuck = copy.deepcopy(ref)
    stuck["runs"]["lpm"]["still_runnable"] = True
    _fails("lpm", stuck, "原地打转")
    bigger = copy.deepcopy(ref)  # 只在 lpm 时偷偷放大池子：缓存留得住全部文档
    bigger["runs"]["lpm"]["num_pages"] *= 2
    _fails("lpm", bigger, "引擎的设置应当是")


def test_the_projects_page_quotes_these_verdicts(reference_results):
    """docs/wrapup/projects.md 引的三段验收输出，判词和这里用同一个种子真跑出的一字不差。"""
    page = (REPO / "docs" / "wrapup" / "projects.md").read_text(encoding="utf-8")
    for project in accept.PROJECTS:
        start = page.index(f"验收 {project}：")
        block = page[start:page.index(f"通过：{project} 的每一项检查都对上了。", start)]
        assert f"ACCEPT_SEED={SEED}" in block
        quoted = [line[4:] for line in block.splitlines() if line.startswith("  ✓ ")]
        assert quoted == _judge(project, reference_results[project]), project
