"""大作业 · 最长前缀优先：LLM(..., schedule_policy="lpm") 让排队的请求按命中前缀缓存的长度接纳。

验收的负载：四篇文档、每篇问四个问题，请求按 A1 B1 C1 D1 A2 B2 … 交错到达；同时只跑两个请求，
KV 池小到前缀缓存只留得住两篇文档。先到先得时缓存来回被挤掉，几乎每个请求都从头算；按命中长度排，
同一篇文档的问题挨着跑。看三件事：不认识的策略名被 ValueError 拦下；两种策略下每个请求的输出都和
Hugging Face 的贪心相同；"lpm" 要算的 prefill token 不到 "fcfs" 的 RATIO 倍。
"""

from __future__ import annotations

import random

from common import Fail, Missing, hf_greedy, model_path, new_llm, on_forward, run_ignore_eos, tokenizer

MAX_TOKENS = 6
CHUNK = 64
RATIO = 0.6  # 先到先得约 1.0；不管同一批里重复前缀的 lpm 最坏约 0.45（两篇新文档各被算两遍）
SENTENCES = ["The river that runs through the town floods almost every spring.",
             "Most of the houses near the bank were rebuilt on stone pillars.",
             "A wooden bridge was replaced by a steel one in 1931.", "The market opens at six every Saturday.",
             "Farmers bring apples, cheese and honey from the hills.", "The school has about four hundred pupils.",
             "Its library is famous for a collection of old maps.", "The mayor is elected every four years.",
             "Tourists come in summer to walk the cliff path.", "A small museum tells the story of the mines.",
             "The last mine closed in 1978 after a long strike.", "Fishing boats leave the harbour before dawn.",
             "The church tower can be seen from every street.", "Winters are mild but very windy.",
             "A festival of lanterns is held on the longest night.", "The railway line reached the town in 1869."]
QUESTIONS = ["When did the last mine close?", "What do farmers sell?", "How often is the mayor elected?",
             "What can tourists do?", "What is the library known for?", "When does the market open?",
             "What happened to the bridge?", "What is the weather like?"]


def workload(seed: int) -> list[str]:
    """四篇文档 × 四个问题，交错排好的提示文本。"""
    rng = random.Random(seed)
    docs = [" ".join(rng.sample(SENTENCES, 9)) for _ in range(4)]
    asks = [rng.sample(QUESTIONS, 4) for _ in docs]
    return [f"Document: {docs[d]}\nQuestion: {asks[d][q]}\nAnswer:" for q in range(4) for d in range(4)]


def pool_pages(prompt_lens: list[int]) -> int:
    """两个在跑的请求放得下，再多一点：它们跑完以后，前缀缓存只留得住两篇文档。"""
    longest = max(prompt_lens) + MAX_TOKENS
    return 2 * longest + longest // 4


# ---------------------------------------------------------------- 子进程里：用你的引擎

def produce(seed: int) -> dict:
    from minisgl.utils.hf import load_tokenizer

    try:
        bad = new_llm(schedule_policy="lmp", num_page_override=64)
        bad.shutdown()
        bad_policy = "收下了"
    except Missing:
        raise
    except ValueError:
        bad_policy = "ValueError"
    except Exception as e:  # noqa: BLE001  判词要说清收到的是什么异常
        bad_policy = type(e).__name__
    prompts = [load_tokenizer(model_path()).encode(t) for t in workload(seed)]
    runs = {}
    for policy in ("fcfs", "lpm"):
        # 每步最多 64 个提示 token：提示要分两三块算，分块算到一半的请求也在队列里
        llm = new_llm(schedule_policy=policy, max_running_req=2, max_extend_tokens=CHUNK,
                      num_page_override=pool_pages([len(p) for p in prompts]))
        computed: list[int] = []
        on_forward(llm, lambda batch, computed=computed: computed.append(
            sum(r.extend_len for r in batch.reqs)) if batch.is_prefill else None)
        outputs, _, still = run_ignore_eos(llm, prompts, MAX_TOKENS, 100 * len(prompts))
        runs[policy] = {"prefill_tokens": sum(computed), "outputs": outputs, "still_runnable": still,
                        "num_pages": llm.cache_manager.num_pages, "rows": llm.config.max_running_req,
                        "chunk": llm.prefill_budget}
        llm.shutdown()
    return {"bad_policy": bad_policy, "runs": runs}


# ---------------------------------------------------------------- 这里：判

def judge(result: dict, seed: int) -> list[str]:
    tok = tokenizer()
    if result["bad_policy"] != "ValueError":
        raise Fail(f'schedule_policy="lmp"（拼错的名字）应当抛 ValueError，实际：{result["bad_policy"]}')
    done = ['schedule_policy="lmp" 被 ValueError 拦下']
    prompts = [tok.encode(t) for t in workload(seed)]
    expected = [hf_greedy(p, MAX_TOKENS) for p in prompts]
    total = sum(len(p) for p in prompts)
    pool = pool_pages([len(p) for p in prompts])
    for policy, run in result["runs"].items():
        if (run["num_pages"], run["rows"], run["chunk"]) != (pool, 2, CHUNK):
            raise Fail(f"{policy}：引擎的设置应当是 KV 池 {pool} 页、同时 2 个请求、每步 {CHUNK} 个 token，"
                       f"实际是 {run['num_pages']} 页、{run['rows']} 个、{run['chunk']} 个")
        if run["still_runnable"]:
            raise Fail(f"{policy}：{100 * len(prompts)} 步之后还有请求没跑完（调度器在原地打转？）")
        for uid, want in enumerate(expected):
            got = run["outputs"][str(uid)]
            if got != want:
                raise Fail(f"{policy}：请求 {uid} 的输出和 HF 的贪心不同：{tok.decode(got)!r} ≠ {tok.decode(want)!r}")
        done.append(f"{policy}：{len(prompts)} 个请求的输出都和 HF 的贪心相同；提示共 {total} 个 token，"
                    f"实际算了 {run['prefill_tokens']} 个")
    fcfs, lpm = (result["runs"][p]["prefill_tokens"] for p in ("fcfs", "lpm"))
    if lpm > RATIO * fcfs:
        raise Fail(f"lpm 算了 {lpm} 个 prefill token，fcfs 算了 {fcfs} 个：{lpm / fcfs:.2f} 倍，"
                   f"应当不到 {RATIO} 倍。排队的请求是按命中前缀缓存的长度接纳的吗？")
    done.append(f"lpm 算的 prefill token 是 fcfs 的 {lpm / fcfs:.2f} 倍（要求不到 {RATIO} 倍）")
    return done
