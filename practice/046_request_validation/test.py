"""练习 046 的评测：从合法的请求体出发随机改坏几处，和参考的检查逐个比较（返回值，或报错的 param）。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_equal, check_type, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
FIELDS = ("messages", "model", "max_tokens", "temperature", "top_p", "top_k", "stop", "stream")
NAN, INF = float("nan"), float("inf")

GOOD = {
    "messages": [[{"role": "user", "content": "hi"}],
                 [{"role": "system", "content": "你是助手"}, {"role": "user", "content": "法国的首都？"},
                  {"role": "assistant", "content": "巴黎"}, {"role": "user", "content": ""}]],
    "model": ["SmolLM2", None],
    "max_tokens": [1, 100, None],
    "temperature": [0, 0.7, 2, 1, 2.0],
    "top_p": [1, 0.5, 1.0, 1e-3],
    "top_k": [-1, 1, 50],
    "stop": [None, "\n", ["a"], ["a", "b", "c", "d"]],
    "stream": [True, False],
}
BAD = {
    "messages": [[], "hi", None, ["hi"], [{"role": "robot", "content": "x"}], [{"role": "user"}],
                 [{"role": "user", "content": 3}], [{"role": "user", "content": "x", "name": "a"}]],
    "model": [3, ["m"]],
    "max_tokens": [0, -3, True, 2.0, "10"],
    "temperature": [-0.1, 2.5, True, "0.5", NAN, INF],
    "top_p": [0, 1.5, False, NAN, "1"],
    "top_k": [0, -2, 1.0, True],
    "stop": ["", [], ["a", "b", "c", "d", "e"], [""], [1], 3, True],
    "stream": [1, "true", None],
}
UNKNOWN = ["n", "frobnicate", "Temperature", "top-k", "logprobs"]


def _num(x, integer=False):
    kinds = int if integer else (int, float)
    return isinstance(x, kinds) and not isinstance(x, bool) and math.isfinite(x)


def reference(body):
    """返回 ("ok", 整理好的参数) 或 ("bad", param)。"""
    if not isinstance(body, dict):
        return "bad", None
    unknown = sorted(k for k in body if k not in FIELDS)
    if unknown:
        return "bad", unknown[0]
    m = body.get("messages")
    if not (isinstance(m, list) and m and all(
            isinstance(x, dict) and set(x) == {"role", "content"}
            and x["role"] in ("system", "user", "assistant") and isinstance(x["content"], str) for x in m)):
        return "bad", "messages"
    checks = [
        ("model", lambda v: v is None or isinstance(v, str), None),
        ("max_tokens", lambda v: v is None or (_num(v, True) and v >= 1), None),
        ("temperature", lambda v: _num(v) and 0 <= v <= 2, 1.0),
        ("top_p", lambda v: _num(v) and 0 < v <= 1, 1.0),
        ("top_k", lambda v: _num(v, True) and (v == -1 or v >= 1), -1),
        ("stop", lambda v: v is None or (isinstance(v, str) and v != "") or (
            isinstance(v, list) and 1 <= len(v) <= 4 and all(isinstance(s, str) and s for s in v)), None),
        ("stream", lambda v: isinstance(v, bool), False),
    ]
    out = {"messages": m}
    for name, ok, default in checks:
        value = body.get(name, default)
        if not ok(value):
            return "bad", name
        out[name] = value
    out["temperature"], out["top_p"] = float(out["temperature"]), float(out["top_p"])
    stop = out["stop"]
    out["stop"] = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
    return "ok", out


def random_body(rng: random.Random):
    if rng.random() < 0.03:
        return rng.choice([[], "messages", None, 3])
    body = {"messages": copy.deepcopy(rng.choice(GOOD["messages"]))}
    for name in FIELDS[1:]:
        if rng.random() < 0.5:
            body[name] = copy.deepcopy(rng.choice(GOOD[name]))
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        r = rng.random()
        name = rng.choice(FIELDS)
        if r < 0.12:
            body[rng.choice(UNKNOWN)] = rng.choice([1, "x", None])
        elif r < 0.2:
            body.pop(name, None)
        else:
            pool = BAD[name] if rng.random() < 0.7 else GOOD[name]
            body[name] = copy.deepcopy(rng.choice(pool))
    return body


def run(mod: object) -> None:
    validate = require(mod, "validate_chat_request")
    BadRequest = require(mod, "BadRequest")

    got = validate({"messages": [{"role": "user", "content": "hi"}], "stop": "\n"})
    check_type(got, dict, "validate_chat_request(题目的第一个例子) 的返回值")
    check_equal(got, reference({"messages": [{"role": "user", "content": "hi"}], "stop": "\n"})[1],
                "题目的第一个例子的返回值")

    rng = random.Random(SEED)
    for _ in range(600):
        body = random_body(rng)
        kind, want = reference(body)
        shown = short(body, 200)
        try:
            result = validate(copy.deepcopy(body))
        except BadRequest as e:
            check(kind == "bad", f"合法的请求被拒绝了（param={getattr(e, 'param', '?')!r}）：{shown}")
            check(isinstance(e.message, str) and e.message, f"BadRequest 的 message 应当是非空字符串：{shown}")
            check(e.param == want, f"报错的 param 应该是 {want!r}（第一处错误），你的是 {e.param!r}：{shown}")
            continue
        except CheckFailed:
            raise
        except Exception as e:  # noqa: BLE001 - 坏请求应当是 BadRequest，不是随便什么异常
            raise CheckFailed(f"应当抛 BadRequest 或正常返回，你的代码抛出了 {type(e).__name__}: {e}；"
                              f"请求体：{shown}") from None
        check(kind == "ok", f"坏请求没有被拦住（应当报 param={want!r}）：{shown}")
        check_equal(result, want, "整理好的参数", shown)
        for name in ("temperature", "top_p"):
            check_type(result[name], float, f"返回的 {name}")


if __name__ == "__main__":
    main(run)
