"""大作业 · 抢占：LLM(..., optimistic_admission=True) 只为提示预留页，decode 时页不够就把
在跑的请求退回队列，以后接着算。

验收：KV 池小到“按最坏情况预留”只能同时跑两个请求。看四件事：同时 decode 的请求超过这个上限
（确实是乐观接纳），有请求 decode 过之后又回到 prefill（确实退回过），每个请求的输出都和
Hugging Face 逐 token 的贪心相同、一个不多一个不少（什么都没丢），跑完 KV 页的账目对得上。
页大小 1 和 4 各跑一遍；重叠调度开着（默认）。
"""

from __future__ import annotations

import random

from common import Fail, hf_greedy, model_path, new_llm, on_forward, run_ignore_eos, tokenizer

MAX_TOKENS = 48
NUM_REQS = 8
STARTS = ["Once upon a time, in a small village by the sea,", "The history of the printing press begins",
          "To bake a loaf of bread at home, you first", "The most important rule of chess is that",
          "When the train finally arrived at the station,", "Photosynthesis is the process by which plants",
          "My favourite thing about autumn is the way", "The old lighthouse keeper looked at the storm and",
          "In the year 2050, cities will probably", "A good night's sleep matters because",
          "The recipe for a simple tomato soup calls for", "Learning a new language as an adult is"]


def div_ceil(a: int, b: int) -> int:
    return -(-a // b)


def plan(prompt_lens: list[int], page_size: int) -> tuple[int, int]:
    """KV 池的页数，和“按最坏情况预留”时最多能同时跑几个请求。"""
    worst = sorted(div_ceil(n + MAX_TOKENS - 1, page_size) for n in prompt_lens)
    pool = worst[-1] * 2 + worst[-1] // 2
    bound, used = 0, 0
    for w in worst:  # 最省页的几个请求凑在一起，最多也只有这么多
        if used + w > pool:
            break
        used, bound = used + w, bound + 1
    return pool, bound


# ---------------------------------------------------------------- 子进程里：用你的引擎

def produce(seed: int) -> dict:
    from minisgl.utils.hf import load_tokenizer

    texts = random.Random(seed).sample(STARTS, NUM_REQS)
    prompts = [load_tokenizer(model_path()).encode(t) for t in texts]
    runs = []
    for page_size in (1, 4):
        pool, _ = plan([len(p) for p in prompts], page_size)
        llm = new_llm(page_size=page_size, num_page_override=pool, optimistic_admission=True,
                      max_running_req=NUM_REQS)
        batches: list[tuple[bool, list[int]]] = []
        prefills: list[tuple[int, list[int]]] = []  # 每次 prefill 的一行：(uid, 这一次的整段提示)

        def see(batch, batches=batches, prefills=prefills):
            batches.append((batch.is_prefill, [r.uid for r in batch.reqs]))
            if batch.is_prefill:
                prefills.extend((r.uid, r.input_ids[: r.device_len].tolist()) for r in batch.reqs)

        on_forward(llm, see)
        outputs, finished, still = run_ignore_eos(llm, prompts, MAX_TOKENS, 50 * MAX_TOKENS)
        llm.cache_manager.check_integrity()  # 页的账目对不上时抛 RuntimeError
        runs.append({"page_size": page_size, "num_pages": llm.cache_manager.num_pages, "outputs": outputs,
                     "finished": finished, "batches": batches, "prefills": prefills,
                     "still_runnable": still})
        llm.shutdown()
    return {"runs": runs}


# ---------------------------------------------------------------- 这里：判

def judge(result: dict, seed: int) -> list[str]:
    tok = tokenizer()
    texts = random.Random(seed).sample(STARTS, NUM_REQS)
    prompts = [tok.encode(t) for t in texts]
    expected = [hf_greedy(p, MAX_TOKENS) for p in prompts]
    done = []
    for run in result["runs"]:
        ps = run["page_size"]
        pool, bound = plan([len(p) for p in prompts], ps)
        head = f"页大小 {ps}（KV 池 {pool} 页，按最坏情况预留最多同时跑 {bound} 个）"
        if run["num_pages"] != pool:
            raise Fail(f"{head}：KV 池应当是 {pool} 页，你的引擎用了 {run['num_pages']} 页")
        if run["still_runnable"]:
            raise Fail(f"{head}：{50 * MAX_TOKENS} 步之后还有请求没跑完（调度器在原地打转？）")
        batches = run["batches"]
        peak = max((len(uids) for prefill, uids in batches if not prefill), default=0)
        if peak <= bound:
            raise Fail(f"{head}：同时 decode 的请求最多 {peak} 个，没超过按最坏情况预留的上限 {bound}："
                       "接纳还是按最坏情况预留的，不是乐观接纳")
        decoded: set[int] = set()
        retracted = set()
        for prefill, uids in batches:
            if prefill:
                retracted |= decoded & set(uids)
            else:
                decoded |= set(uids)
        if not retracted:
            raise Fail(f"{head}：没有哪个请求 decode 过之后又回到 prefill：页不够时没有退回请求")
        for uid in range(NUM_REQS):
            got = run["outputs"][str(uid)]
            ends = run["finished"][str(uid)]
            if ends != [MAX_TOKENS]:
                raise Fail(f"{head}：请求 {uid} 应当在第 {MAX_TOKENS} 个 token 处结束一次，"
                           f"实际结束标记出现在 {ends}（共 {len(got)} 个 token）")
            if got != expected[uid]:
                at = next(i for i, (a, b) in enumerate(zip(got, expected[uid])) if a != b)
                raise Fail(f"{head}：请求 {uid}（提示 {texts[uid]!r}）第 {at} 个 token 和 HF 的贪心不同："
                           f"{tok.decode(got[:at + 1])!r} ≠ {tok.decode(expected[uid][:at + 1])!r}")
        for uid, ids in run["prefills"]:
            # 每次 prefill 的提示都得是“原来的提示 + 前 m 个生成的 token”（第一次 m = 0）
            m = len(ids) - len(prompts[uid])
            if m < 0 or ids != prompts[uid] + run["outputs"][str(uid)][:m]:
                raise Fail(f"{head}：请求 {uid} 的某次 prefill 的提示既不是原来的提示，"
                           "也不是“原来的提示 + 它已经生成的前几个 token”")
        for uid in range(NUM_REQS):
            again = [ids for u, ids in run["prefills"] if u == uid][1:]
            if any(len(ids) == len(prompts[uid]) for ids in again):
                raise Fail(f"{head}：请求 {uid} 被退回后从原来的提示重新算起：已经生成的 token 丢了"
                           "（应当把“提示 + 已经生成的 token”当作新提示）")
            rounds = sum(uid in uids for _, uids in batches)
            if rounds > MAX_TOKENS + len(again):
                raise Fail(f"{head}：请求 {uid} 进了 {rounds} 次前向，生成 {MAX_TOKENS} 个 token、退回 "
                           f"{len(again)} 次最多要 {MAX_TOKENS + len(again)} 次：有 token 被算了又丢掉")
        times = len(run["prefills"]) - NUM_REQS
        done.append(f"{head}：同时 decode 最多 {peak} 个；请求 {sorted(retracted)} 共退回 {times} 次，"
                    f"每次都带着已经生成的 token 重新排队；"
                    f"{NUM_REQS} 个请求各 {MAX_TOKENS} 个 token，全和 HF 的贪心相同；KV 页的账目对得上")
    return done
