"""大作业 · 约束解码：SamplingParams(json_schema=...) 让引擎每一步只允许合 schema 的 token。

验收看三件事：生成的文本是合 schema 的紧凑 JSON；每一步选的 token 是“允许的 token 里 logits
最大的那个”（用 Hugging Face 的 logits 逐步核对，事后修补、或者掩码收得过紧都过不了）；
同一批里没带约束的请求不受影响。schema 的范围和输出的格式见 docs/wrapup/projects.md。
"""

from __future__ import annotations

import json
import random
import re

from common import Fail, Missing, hf_logits, new_llm, on_forward, tokenizer

TIE = 1e-3  # 和 HF 的 logits 比：差不到这么多算并列（引擎与 HF 的浮点误差在 1e-5 量级）
KEYS = [("name", "string"), ("city", "string"), ("title", "string"), ("country", "string"),
        ("age", "integer"), ("year", "integer"), ("score", "integer"),
        ("admin", "boolean"), ("active", "boolean"), ("verified", "boolean")]
TOPICS = ["a fictional user of a web shop", "a famous scientist", "a small coffee company",
          "a character in a fantasy novel", "a football player", "a city library member"]
PLAIN_PROMPT = "The three primary colors are"
BAD_SCHEMAS = {"不是字典": "name",
               "类型拼错": {"type": "object", "properties": {"a": {"type": "strnig"}}},
               "maxLength 为负": {"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}}}


def max_tokens(schema: dict) -> int:
    """最长的合法文档有几个字符，再加 1 个 EOS：每个 token 至少一个字符，掩码对的话一定在这之内写完。"""
    chars = 1  # {
    for key, spec in schema["properties"].items():
        chars += len(json.dumps(key)) + 2  # "键": 和后面的 , 或 }
        chars += {"string": spec.get("maxLength", 64) + 2, "integer": 7, "boolean": 5}[spec["type"]]
    return chars + 1


def draw_cases(seed: int) -> list[tuple[str, dict]]:
    """三个（提示，schema）：2–4 个键，随机的顺序，字符串随机的 maxLength。"""
    rng = random.Random(seed)
    cases = []
    for topic in rng.sample(TOPICS, 3):
        props = {}
        for key, kind in rng.sample(KEYS, rng.randint(2, 4)):
            props[key] = {"type": kind}
            if kind == "string":
                props[key]["maxLength"] = rng.randint(6, 24)
        cases.append((f"Here is {topic}, described as a JSON object: ", {"type": "object", "properties": props}))
    return cases


# ---------------------------------------------------------------- 子进程里：用你的引擎

def produce(seed: int) -> dict:
    from minisgl.core import SamplingParams

    cases = draw_cases(seed)
    try:
        SamplingParams(max_tokens=8, json_schema=cases[0][1])
    except TypeError:
        raise Missing("SamplingParams 还不认识 json_schema 这个参数") from None
    bad = {}
    for name, schema in BAD_SCHEMAS.items():
        try:
            SamplingParams(max_tokens=8, json_schema=schema)
            bad[name] = "收下了"
        except ValueError:  # 子类（例如 json.JSONDecodeError）也算
            bad[name] = "ValueError"
        except Exception as e:  # noqa: BLE001  判词要说清收到的是什么异常
            bad[name] = type(e).__name__
    llm = new_llm(max_running_req=8, num_page_override=4096)
    batches: list[list[int]] = []  # 每个 decode 批里的 uid
    on_forward(llm, lambda batch: None if batch.is_prefill else batches.append([r.uid for r in batch.reqs]))
    prompts = [p for p, _ in cases] + [PLAIN_PROMPT]
    params = [SamplingParams(max_tokens=max_tokens(s), json_schema=s) for _, s in cases]
    params.append(SamplingParams(max_tokens=24))
    mixed = llm.generate(prompts, params)  # 带约束和不带约束的请求在同一批里
    alone = llm.generate([PLAIN_PROMPT], SamplingParams(max_tokens=24))
    llm.shutdown()
    return {"bad": bad, "outputs": [o["token_ids"] for o in mixed], "plain_alone": alone[0]["token_ids"],
            "decode_batches": batches}


# ---------------------------------------------------------------- 这里：判

def viable(text: str, schema: dict) -> str:
    """text 是不是合 schema 的紧凑 JSON：'complete'、'prefix'（还能接着写成合法的）或 'invalid'。"""
    parts: list[tuple[str, object]] = []
    for n, (key, spec) in enumerate(schema["properties"].items()):
        parts.append(("lit", ("{" if n == 0 else ",") + json.dumps(key) + ":"))
        parts.append((spec["type"], spec.get("maxLength", 64)))
    parts.append(("lit", "}"))
    pos = 0
    for kind, arg in parts:
        rest = text[pos:]
        if kind == "lit":
            if rest.startswith(arg):
                pos += len(arg)
                continue
            return "prefix" if arg.startswith(rest) else "invalid"
        if kind == "string":
            m = re.match(r'"([ !#-\[\]-~]*)("?)', rest)
            if not m:
                return "prefix" if rest == "" else "invalid"
            if len(m.group(1)) > arg:
                return "invalid"
            if not m.group(2):  # 字符串还没关上
                return "prefix" if m.end() == len(rest) else "invalid"
            pos += m.end()
        elif kind == "boolean":
            word = next((w for w in ("true", "false") if rest.startswith(w)), None)
            if word is None:
                return "prefix" if rest and ("true".startswith(rest) or "false".startswith(rest)) \
                    or rest == "" else "invalid"
            pos += len(word)
        else:  # integer
            m = re.match(r"-?(0|[1-9][0-9]*)?", rest)
            digits = m.group(1) or ""
            if len(digits) > 6 or (m.group(0).lstrip("-") == "" and m.end() < len(rest)):
                return "invalid"
            if m.end() == len(rest):  # 数字写到了末尾：还能接着写（或者接上后面的字面文本）
                return "prefix"
            if digits.startswith("0") and rest[m.end()].isdigit():
                return "invalid"
            pos += m.end()
    return "complete" if pos == len(text) else "invalid"


def judge(result: dict, seed: int) -> list[str]:
    import torch

    tok = tokenizer()
    done = []
    for name, got in result["bad"].items():
        if got != "ValueError":
            raise Fail(f"不合法的 schema（{name}）应当在 SamplingParams(...) 时抛 ValueError，实际：{got}")
    done.append(f"{len(BAD_SCHEMAS)} 个不合法的 schema 都在 SamplingParams(...) 时被 ValueError 拦下")
    eos, special = tok.eos_token_id, set(tok.all_special_ids)
    steps = 0
    for (prompt, schema), ids in zip(draw_cases(seed), result["outputs"]):
        text = tok.decode(ids)
        where = f"提示 {prompt!r}、schema {json.dumps(schema['properties'])}"
        if len(ids) >= max_tokens(schema):
            raise Fail(f"{where}：生成到 max_tokens={max_tokens(schema)}（最长的合法文档的字符数 + 1）"
                       f"还没结束，输出 {text!r}")
        if viable(text, schema) != "complete":
            raise Fail(f"{where}：输出不是合 schema 的紧凑 JSON：{text!r}")
        obj = json.loads(text)
        if list(obj) != list(schema["properties"]):
            raise Fail(f"{where}：键的顺序应当是 {list(schema['properties'])}，输出 {text!r}")
        prompt_ids = tok.encode(prompt)
        seq = prompt_ids + ids + [eos]
        logits = hf_logits(seq[:-1])
        for t, chosen in enumerate(ids + [eos]):
            before = tok.decode(ids[:t])

            def allowed(token: int) -> bool:
                if token == eos:
                    return viable(before, schema) == "complete"
                piece = tok.decode([token])
                return (token not in special and bool(piece) and all(" " <= c <= "~" for c in piece)
                        and viable(before + piece, schema) != "invalid")

            row = logits[len(prompt_ids) - 1 + t]
            if not allowed(chosen):
                raise Fail(f"{where}：第 {t} 步选了不允许的 token {tok.decode([chosen])!r}（已生成 {before!r}）")
            for better in torch.nonzero(row > row[chosen] + TIE).flatten().tolist():
                if allowed(better):
                    raise Fail(f"{where}：第 {t} 步（已生成 {before!r}）选了 {tok.decode([chosen])!r}，"
                               f"可允许的 {tok.decode([better])!r} 的 logit 更大"
                               f"（{row[better]:.3f} > {row[chosen]:.3f}）：掩码收得太紧，或者没按掩码取最大")
            steps += 1
        done.append(f"{text}  ← {where}")
    done.append(f"共 {steps} 步（含结尾的 EOS），每一步都是允许的 token 里 HF logits 最大的那个")
    plain = len(result["outputs"]) - 1  # 第一次 generate 的 uid 从 0 起，不带约束的是最后一个
    shared = sum(plain in uids and len(uids) > 1 for uids in result["decode_batches"])
    if shared == 0:
        raise Fail("不带约束的请求从没和带约束的请求进同一个 decode 批：掩码有没有漏到别的行，没有检验到")
    if result["outputs"][-1] != result["plain_alone"]:
        raise Fail("和带约束的请求同一批、没带约束的请求，输出和它单独跑时不同："
                   f"{tok.decode(result['outputs'][-1])!r} ≠ {tok.decode(result['plain_alone'])!r}")
    done.append(f"不带约束的请求和带约束的一起 decode 了 {shared} 步，输出和它单独跑时相同")
    return done
