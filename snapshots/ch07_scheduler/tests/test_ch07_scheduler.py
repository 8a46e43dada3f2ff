"""第 7 章：调度器与离线接口。贪心输出和 HF 逐 token 相同，调度设置怎么变都一样；
停止规则（正好 max_tokens 个、EOS）、接纳规则（先来先服务、按最坏情况预留页、token 预算）、
decode 批的顺序、坏请求只影响它自己。

这些测试讲的是没有前缀缓存的调度，所以都显式写 cache_type="naive"：后面的章节换了默认的缓存
（第 9 章起是 radix，跑完会留下缓存的页），这一章的测试在那些章的树里照样成立。"""

from __future__ import annotations

import functools
import importlib

import pytest
import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler import ReqOutput, Scheduler

TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,"]


@functools.lru_cache(maxsize=None)
def _hf(path: str, prompt: tuple[int, ...], n: int) -> tuple[int, ...]:
    return tuple(hf_greedy(path, list(prompt), n))


def hf_ref(path, prompt: list[int], n: int) -> list[int]:
    """HF 的贪心输出（同一进程里同样的输入只算一次）。"""
    return list(_hf(str(path), tuple(prompt), n))


def ids(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32)


def greedy(n: int, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=n, **kw)


def run_to_end(sched: Scheduler) -> list[list[ReqOutput]]:
    """一步步跑到没有能跑的请求，返回每一步的结果。"""
    steps = []
    while sched.runnable:
        steps.append(sched.step())
        assert steps[-1], "有能跑的请求，这一步却什么都没算"
    return steps


def tokens_of(steps: list[list[ReqOutput]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for step in steps:
        for o in step:
            out.setdefault(o.uid, []).append(o.next_token)
    return out


# 关于 KV 页的断言都经过下面两个函数：后面的章（CacheManager、前缀缓存）改了页的记账，只改这里


def free_pages(sched: Scheduler) -> int:
    return sched.page_allocator.num_free_pages


def assert_all_returned(sched: Scheduler) -> None:
    """空闲时页表的行和 KV 页全部还回来了。"""
    assert not sched.runnable
    assert sched.table_manager.available_size == sched.config.max_running_req
    assert free_pages(sched) == sched.engine.num_pages


# ---------------------------------------------------------------- 贪心输出与 HF 一致


SETTINGS = [(2, 1, 8192), (8, 4, 8192), (3, 2, 8)]  # (max_running_req, page_size, max_extend_tokens)


@pytest.mark.parametrize("model,rows,page_size,budget",
                         [(smollm2, *SETTINGS[0]), (smollm2, *SETTINGS[2])]  # SmolLM2 慢：两种设置
                         + [(tiny_qwen3, *s) for s in SETTINGS],
                         ids=["smollm2-2-1-8192", "smollm2-3-2-8"] + [f"tiny_qwen3-{r}-{p}-{b}" for r, p, b in SETTINGS])
def test_greedy_matches_hf_whatever_the_scheduling(model, rows, page_size, budget):
    path = model()
    llm = LLM(path, cache_type="naive", max_running_req=rows, page_size=page_size, max_extend_tokens=budget,
              num_page_override=256 // page_size, max_seq_len_override=64)
    max_tokens = [7, 3, 11, 5]
    prompts = [encode(path, t) for t in TEXTS]
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out["token_ids"] == hf_ref(path, prompt, n)
    assert_all_returned(llm)
    llm.shutdown()


@pytest.mark.parametrize("rows,page_size,budget,pages", [
    (1, 16, 1, 64),  # 一次只跑一个请求；预算 1 个 token：每个 prefill 批只有一个请求
    (5, 3, 16, 64),  # 页大小 3：页边界和提示长度错开
    (4, 4, 8192, 7),  # 池子只有 7 页：最坏情况放不下时请求在队列里等
])
def test_greedy_matches_hf_on_tiny_qwen3_under_more_settings(rows, page_size, budget, pages):
    path = tiny_qwen3()
    llm = LLM(path, cache_type="naive", max_running_req=rows, page_size=page_size, max_extend_tokens=budget,
              num_page_override=pages, max_seq_len_override=28)
    prompts = [encode(path, t) for t in TEXTS] + [[7, 8, 9], list(range(100, 112))]
    max_tokens = [9, 2, 14, 5, 1, 12]
    outs = llm.generate(prompts, [greedy(n, ignore_eos=True) for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out["token_ids"] == hf_ref(path, prompt, n)
    assert_all_returned(llm)
    llm.shutdown()


def test_generate_accepts_strings_and_token_ids_and_can_be_called_again():
    path = tiny_qwen3()
    llm = LLM(path, cache_type="naive", max_running_req=2, page_size=4, num_page_override=32, max_seq_len_override=48)
    first = llm.generate(["Once upon a time,", encode(path, "Once upon a time,")], greedy(6, ignore_eos=True))
    assert first[0] == first[1]  # 文字和它的 token id 是同一个请求
    assert first[0]["token_ids"] == hf_ref(path, encode(path, "Once upon a time,"), 6)
    assert first[0]["text"] == llm.tokenizer.decode(first[0]["token_ids"])
    again = llm.generate([encode(path, "Once upon a time,")], greedy(6, ignore_eos=True))
    assert again == first[:1]  # 同一个 LLM 再调用一次，结果一样，不受上一次的影响
    assert_all_returned(llm)
    llm.shutdown()


# ---------------------------------------------------------------- 停止规则


@pytest.mark.parametrize("page_size", [1, 4])
def test_exactly_max_tokens_never_one_fewer(page_size):
    path = tiny_qwen3()
    llm = LLM(path, cache_type="naive", max_running_req=8, page_size=page_size, num_page_override=128 // page_size,
              max_seq_len_override=32)  # 8 个请求的最坏情况同时放得下：一起 prefill
    prompt = [11, 12, 13, 14, 15]
    max_tokens = [1, 2, 3, 4, 5, 8, 11, 27]  # 27 = 32 - 5：正好顶到 max_seq_len
    for uid, n in enumerate(max_tokens):
        llm.add_req(uid, ids(prompt), greedy(n, ignore_eos=True))
    steps = run_to_end(llm)
    for uid, n in enumerate(max_tokens):
        mine = [o for step in steps for o in step if o.uid == uid]
        assert len(mine) == n, f"max_tokens={n} 的请求得到了 {len(mine)} 个 token"
        assert [o.finished for o in mine] == [False] * (n - 1) + [True]
        assert [o.next_token for o in mine] == hf_ref(path, prompt, n)
    assert len(steps) == max(max_tokens)  # 1 步 prefill + 26 步 decode，没有多跑一步
    assert_all_returned(llm)
    llm.shutdown()


def test_stops_at_eos_and_leaves_it_out_unless_ignore_eos():
    path = smollm2()
    llm = LLM(path, cache_type="naive", max_running_req=4, page_size=4, num_page_override=64, max_seq_len_override=64)
    chat = list(llm.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, tokenize=True, return_dict=False))
    other = encode(path, "Once upon a time,")
    ref = hf_ref(path, chat, 16)
    eos = llm.eos_token_id
    assert eos in ref[:-1], "这个提示在 HF 里应当在 16 个 token 之内生成 EOS"
    cut = ref.index(eos)
    outs = llm.generate([chat, other, chat],
                        [greedy(16), greedy(12, ignore_eos=True), greedy(16, ignore_eos=True)])
    assert outs[0]["token_ids"] == ref[:cut]  # 在第一个 EOS 处停，EOS 本身不在输出里
    assert eos not in outs[0]["token_ids"] and "<|im_end|>" not in outs[0]["text"]
    assert outs[1]["token_ids"] == hf_ref(path, other, 12)  # 同批的别的请求照常跑完
    assert outs[2]["token_ids"] == ref  # ignore_eos：EOS 也是普通 token，一直生成到 16 个 个
    # 调度器这一层：EOS 那一步照样报告出来，并且标着结束
    llm.add_req(100, ids(chat), greedy(16))
    mine = [o for step in run_to_end(llm) for o in step]
    assert [o.next_token for o in mine] == ref[:cut + 1] and mine[-1].finished
    assert_all_returned(llm)
    llm.shutdown()


# ---------------------------------------------------------------- 坏请求只影响它自己


def test_too_long_prompt_is_an_error_and_nothing_runs():
    llm = LLM(tiny_qwen3(), cache_type="naive", max_running_req=2, num_page_override=32, max_seq_len_override=32)
    with pytest.raises(ValueError, match="第 1 个提示"):
        llm.generate([[1, 2, 3], list(range(1, 31))], SamplingParams(max_tokens=4))
    assert not llm.runnable
    outs = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4, ignore_eos=True))
    assert len(outs[0]["token_ids"]) == 4
    llm.shutdown()


def test_a_bad_request_is_refused_and_the_running_ones_finish():
    path = tiny_qwen3()
    llm = LLM(path, cache_type="naive", max_running_req=2, page_size=4, num_page_override=16, max_seq_len_override=24)
    a, b = [5, 6, 7, 8], [9, 10, 11]
    llm.add_req(0, ids(a), greedy(10, ignore_eos=True))
    llm.add_req(1, ids(b), greedy(6, ignore_eos=True))
    steps = [llm.step(), llm.step()]
    before = llm.table_manager.available_size, free_pages(llm)
    bad = [
        (2, list(range(1, 22)), 4, "超过了引擎能放下的 24 个 token"),  # 21 + 4 > 24
        (0, [1, 2], 3, "uid 重复"),  # 请求 0 还在跑
        (3, [], 3, "提示是空的"),
        (4, [1, 49152], 3, r"token id 必须在 \[0, 49152\) 之内"),
    ]
    for uid, prompt, n, message in bad:
        with pytest.raises(ValueError, match=message):
            llm.add_req(uid, ids(prompt), greedy(n))
    # 什么都没变：没排进队列，也没占行、占页
    assert not llm.prefill_manager.runnable
    assert (llm.table_manager.available_size, free_pages(llm)) == before
    llm.add_req(5, ids(list(range(1, 21))), greedy(4, ignore_eos=True))  # 20 + 4 = 24：正好放得下
    got = tokens_of(steps + run_to_end(llm))
    assert got[0] == hf_ref(path, a, 10) and got[1] == hf_ref(path, b, 6)
    assert got[5] == hf_ref(path, list(range(1, 21)), 4)
    assert_all_returned(llm)
    llm.shutdown()


def test_abort_frees_a_running_request_and_drops_a_pending_one():
    path = tiny_qwen3()
    llm = LLM(path, cache_type="naive", max_running_req=2, page_size=2, num_page_override=32, max_seq_len_override=32)
    for uid in range(4):
        llm.add_req(uid, ids([20 + uid, 30, 40]), greedy(8, ignore_eos=True))
    steps = [llm.step(), llm.step()]  # 0、1 在跑，2、3 在排队
    assert llm.abort_req(1) and llm.abort_req(3)
    assert not llm.abort_req(3) and not llm.abort_req(99)
    got = tokens_of(steps + run_to_end(llm))
    assert sorted(got) == [0, 1, 2] and len(got[1]) == 2  # 3 从没跑过；1 跑了两步就停了
    for uid in (0, 2):
        assert got[uid] == hf_ref(path, [20 + uid, 30, 40], 8)
    assert_all_returned(llm)
    llm.shutdown()


# ---------------------------------------------------------------- 采样参数


def test_mixed_sampling_params_one_per_prompt():
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS]
    params = [greedy(5, ignore_eos=True),
              SamplingParams(temperature=0.8, top_k=20, max_tokens=7, ignore_eos=True),
              greedy(9, ignore_eos=True),
              SamplingParams(temperature=1.2, top_p=0.9, max_tokens=3, ignore_eos=True)]
    runs = []
    for _ in range(2):  # 同一个种子跑两遍：采样的请求也一样
        llm = LLM(path, cache_type="naive", max_running_req=3, page_size=4, num_page_override=64, max_seq_len_override=64)
        runs.append(llm.generate(prompts, params))
        assert_all_returned(llm)
        llm.shutdown()
    outs = runs[0]
    assert runs[0] == runs[1]
    assert [len(o["token_ids"]) for o in outs] == [5, 7, 9, 3]
    assert outs[0]["token_ids"] == hf_ref(path, prompts[0], 5)
    assert outs[2]["token_ids"] == hf_ref(path, prompts[2], 9)
    assert outs[1]["token_ids"] != hf_ref(path, prompts[1], 7)  # 温度 0.8 的随机 logits：不会正好是贪心


def test_sampling_params_list_must_match_the_prompts():
    llm = LLM(tiny_qwen3(), cache_type="naive", max_running_req=2, num_page_override=32, max_seq_len_override=32)
    with pytest.raises(ValueError, match="一样多"):
        llm.generate([[1, 2], [3, 4]], [greedy(3)])
    with pytest.raises(ValueError, match="第 1 个提示"):
        llm.generate([[1, 2], 3.5], greedy(3))
    assert not llm.runnable
    llm.shutdown()


# ---------------------------------------------------------------- 接纳与批的顺序


def test_decode_batch_keeps_admission_order():
    llm = LLM(tiny_qwen3(), cache_type="naive", max_running_req=4, page_size=4, num_page_override=64, max_seq_len_override=32)
    uids, lens = [42, 7, 19, 3, 88], [6, 3, 5, 4, 2]  # uid 的大小和到达的顺序无关
    for uid, n in zip(uids, lens):
        llm.add_req(uid, ids([uid, 1, 2]), greedy(n, ignore_eos=True))
    orders = [[o.uid for o in step] for step in run_to_end(llm)]
    # prefill 先收下前 4 个；每一步 decode 批都是在跑的请求按接纳的先后；88 在 7 结束后才进来，排在最后
    assert orders[0] == [42, 7, 19, 3]
    assert orders[1] == [42, 7, 19, 3] and orders[2] == [42, 7, 19, 3]
    assert orders[3] == [88]  # 7 结束，空出一行：prefill 优先
    assert orders[4] == [42, 19, 3, 88]
    for before, after in zip(orders[4:], orders[5:]):
        assert after == [u for u in before if u in after]  # 只会有人离开，剩下的顺序不变
    llm.shutdown()


def test_fcfs_does_not_let_a_small_request_jump_the_queue():
    # 池子 8 页 × 4 = 32 个 token。请求 0 最坏要 ceil((4 + 20 - 1) / 4) = 6 页；
    # 请求 1 要 ceil((8 + 8 - 1) / 4) = 4 页，放不下；排在它后面的请求 2 只要 1 页，也不许插队
    llm = LLM(tiny_qwen3(), cache_type="naive", max_running_req=4, page_size=4, num_page_override=8, max_seq_len_override=32)
    llm.add_req(0, ids([1, 2, 3, 4]), greedy(20, ignore_eos=True))
    llm.add_req(1, ids(list(range(10, 18))), greedy(8, ignore_eos=True))
    llm.add_req(2, ids([5]), greedy(2, ignore_eos=True))
    orders = [[o.uid for o in step] for step in run_to_end(llm)]
    assert orders[0] == [0] and orders[:20] == [[0]] * 20  # 请求 0 独自跑完
    assert orders[20] == [1, 2]  # 页还回来之后，1 和 2 按到达的顺序一起进来
    assert_all_returned(llm)
    llm.shutdown()


def test_admission_reserves_the_worst_case_so_no_request_runs_out_of_pages():
    # 每个请求最坏 ceil((5 + 8 - 1) / 4) = 3 页；7 页的池子同时只能放 2 个，后两个要等前两个还页
    path = tiny_qwen3()
    llm = LLM(path, cache_type="naive", max_running_req=4, page_size=4, num_page_override=7, max_seq_len_override=28)
    prompts = [[60 + i, 61, 62, 63, 64] for i in range(4)]
    for uid, prompt in enumerate(prompts):
        llm.add_req(uid, ids(prompt), greedy(8, ignore_eos=True))
    steps = run_to_end(llm)  # 页不够会在 alloc_slots 里抛 OutOfPagesError
    orders = [[o.uid for o in step] for step in steps]
    assert orders == [[0, 1]] * 8 + [[2, 3]] * 8
    got = tokens_of(steps)
    for uid, prompt in enumerate(prompts):
        assert got[uid] == hf_ref(path, prompt, 8)
    assert_all_returned(llm)
    llm.shutdown()


def test_token_budget_limits_a_prefill_batch():
    llm = LLM(tiny_qwen3(), cache_type="naive", max_running_req=8, page_size=4, max_extend_tokens=8,
              num_page_override=64, max_seq_len_override=32)
    for uid, n in enumerate([8, 3, 4, 2, 5]):
        llm.add_req(uid, ids(list(range(1, n + 1))), greedy(2, ignore_eos=True))
    orders = [[o.uid for o in step] for step in run_to_end(llm)]
    # 8 个 token 正好用完预算，独自一批；3 + 4 ≤ 8，再加 2 就超了；然后 2 + 5
    assert orders == [[0], [1, 2], [3, 4], [0, 1, 2, 3, 4]]
    assert_all_returned(llm)
    llm.shutdown()


def test_a_first_request_longer_than_the_budget_is_taken_whole():
    if hasattr(importlib.import_module("minisgl.scheduler.prefill"), "ChunkedReq"):
        pytest.skip("第 10 章起，超过预算的请求改为分块 prefill（见 tests/test_ch10_chunked_prefill.py）")
    llm = LLM(tiny_qwen3(), cache_type="naive", max_running_req=8, page_size=4, max_extend_tokens=8,
              num_page_override=64, max_seq_len_override=32)
    for uid, n in enumerate([12, 3]):
        llm.add_req(uid, ids(list(range(1, n + 1))), greedy(2, ignore_eos=True))
    orders = [[o.uid for o in step] for step in run_to_end(llm)]
    # 12 个 token 超过预算 8，排在队首也收下（否则它永远进不来），独自一批
    assert orders == [[0], [1], [0, 1]]
    assert_all_returned(llm)
    llm.shutdown()
