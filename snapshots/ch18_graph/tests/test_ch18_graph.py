"""第 18 章：图捕获。

- 录哪些批大小：1、2、4，再每 8 个一档；超过请求数上限的去掉；CPU 上默认不录；坏的设置是中文错误；
- decode 走编译好的那份前向时，贪心结果与 HF 逐 token 相同：tiny Qwen3 和 SmolLM2，重叠开和关，
  批大小不在表里（要补占位请求）、请求陆续结束（批变小、补齐的档位跟着变）、torch 和 paged 两种后端；
- 编译次数 = 录的批大小个数，跑完之后不再增加；会引起重编的改动在重放时报错，而不是悄悄重编；
- 写 KV 池的算子声明了原地改写：编译出的代码里没有拷贝整个池子的循环；
- 错的版本：positions 缓冲区不刷新，输出流畅但和 HF 不同，这里的比较抓得住它。
"""

from __future__ import annotations

import re

import pytest
import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.engine.config import EngineConfig
from minisgl.engine.graph import GraphInputs, capture_batch_sizes
from minisgl.kvcache import MHAKVCachePool
from minisgl.llm import LLM
from minisgl.server.args import parse_args

TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,",
         "Water boils at", "My favourite colour is"]
CPU = torch.device("cpu")


# ---------------------------------------------------------------- 录哪些批大小
def test_batch_sizes_are_1_2_4_then_steps_of_8_cut_at_the_request_limit():
    assert capture_batch_sizes(None, 40, 256, CPU) == [1, 2, 4, 8, 16, 24, 32, 40]
    assert capture_batch_sizes(None, 40, 20, CPU) == [1, 2, 4, 8, 16]
    assert capture_batch_sizes(None, 3, 256, CPU) == [1, 2]
    assert capture_batch_sizes(None, None, 256, CPU) == []  # CPU 上默认不编译
    gpu = capture_batch_sizes(None, None, 256, torch.device("cuda"))
    assert gpu[:4] == [1, 2, 4, 8] and gpu[-1] == 160 and all(b % 8 == 0 for b in gpu[3:])
    assert capture_batch_sizes((8, 3, 3, 300), None, 256, CPU) == [3, 8]  # 给了列表就用列表


@pytest.mark.parametrize("fields, message", [
    ({"cuda_graph_bs": (0, 2)}, "cuda_graph_bs 必须是 ≥ 1 的整数"),
    ({"cuda_graph_bs": 4}, "cuda_graph_bs 必须是 ≥ 1 的整数组成的列表"),
    ({"cuda_graph_bs": ("4",)}, "cuda_graph_bs 必须是 ≥ 1 的整数"),
    ({"cuda_graph_max_bs": -1}, "cuda_graph_max_bs 必须是 ≥ 0 的整数"),
])
def test_bad_graph_settings_are_chinese_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(model_path=tiny_qwen3(), **fields)


def test_the_launcher_flag_has_upstreams_names(capsys):
    assert parse_args(["--model-path", str(tiny_qwen3()), "--cuda-graph-max-bs", "16"]).cuda_graph_max_bs == 16
    assert parse_args(["--model-path", str(tiny_qwen3()), "--graph", "0"]).cuda_graph_max_bs == 0
    with pytest.raises(SystemExit):
        parse_args(["--model-path", str(tiny_qwen3()), "--graph", "-1"])
    assert "要 ≥ 0 的整数" in capsys.readouterr().err


# ---------------------------------------------------------------- 整个引擎 == HF
def make_llm(path, **overrides) -> LLM:
    fields = dict(max_running_req=8, num_page_override=600, max_seq_len_override=96, page_size=2)
    return LLM(path, **{**fields, **overrides})


def run_against_hf(llm: LLM, path, max_tokens: list[int]) -> None:
    prompts = [encode(path, t) for t in TEXTS[: len(max_tokens)]]
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out["token_ids"] == hf_greedy(path, prompt, n), f"提示 {prompt[:8]}… 与 HF 不同"


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "no-overlap"])
def test_compiled_decode_equals_hf_and_never_recompiles(overlap, monkeypatch):
    """6 个请求、长度各不相同：批大小 6 → 补到 8，陆续结束后 5、3 → 补到 8、4，最后 1、2。"""
    if not overlap:
        monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
    path = tiny_qwen3()
    llm = make_llm(path, cuda_graph_bs=(1, 2, 4, 8))
    runner = llm.engine.graph_runner
    assert runner.compiles == 4  # 每个批大小编一次
    padded = []
    pad = runner.pad_batch
    runner.pad_batch = lambda batch: (pad(batch), padded.append((batch.size, batch.padded_size)))
    replays = []
    replay = runner.replay
    runner.replay = lambda batch: (replays.append(batch.padded_size), replay(batch))[1]
    run_against_hf(llm, path, [12, 3, 9, 5, 7, 10])
    assert runner.compiles == 4, "跑起来之后又编译了"
    assert (6, 8) in padded and (3, 4) in padded and (1, 1) in padded
    assert sorted(set(replays)) == [1, 2, 4, 8]  # 每一档都真的放过
    llm.cache_manager.check_integrity()
    llm.shutdown()


@pytest.mark.parametrize("backend", ["torch", "paged"])
def test_smollm2_compiled_decode_equals_hf(backend):
    path = smollm2()
    llm = make_llm(path, cuda_graph_bs=(1, 4), max_running_req=4, attention_backend=backend)
    run_against_hf(llm, path, [8, 5, 3])  # 3 → 补到 4，再 2 → 补到 4，最后 1
    assert llm.engine.graph_runner.compiles == 2
    llm.shutdown()


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "no-overlap"])
def test_replay_refuses_to_recompile_silently(overlap, monkeypatch):
    """编译时读到的 Python 数（这里是最后一层 RMSNorm 的 eps）被当成常数编进了代码，dynamo 给它装了
    守卫。它一变守卫就失效：重放不许悄悄花几秒重编，要当场报错。"""
    if not overlap:
        monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
    path = tiny_qwen3()
    llm = make_llm(path, cuda_graph_bs=(1,), max_running_req=1)
    llm.generate([encode(path, TEXTS[0])], SamplingParams(max_tokens=3, ignore_eos=True))
    norm = llm.engine.model.model.norm
    norm.eps *= 2  # prefill 不走图，照常算；decode 一重放就碰到守卫
    with pytest.raises(Exception, match="(?i)recompil"):
        llm.generate([encode(path, TEXTS[1])], SamplingParams(max_tokens=3, ignore_eos=True))
    assert llm.engine.graph_runner.compiles == 1
    if overlap:  # 工作线程上的错误是"粘住"的：收尾时再抛一次，但照样收尾
        with pytest.raises(RuntimeError, match="(?i)recompil"):
            llm.shutdown()
    else:
        llm.shutdown()


# ---------------------------------------------------------------- 写 KV 池不拷贝池子
def loop_lengths(fn, *args) -> set[int]:
    """编译 fn，返回 inductor 生成的 C++ 代码里每个循环的长度。"""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    _, codes = run_and_get_code(torch.compile(fn, fullgraph=True, dynamic=False), *args)
    torch._dynamo.reset()
    return {int(n) for n in re.findall(r"<static_cast<int64_t>\((\d+)L\)", "\n".join(codes))}


def test_compiled_store_kv_writes_the_pool_in_place_without_copying_it():
    pool = MHAKVCachePool(num_kv_heads=2, num_layers=3, head_dim=16, num_pages=509, page_size=1,
                          dtype=torch.float32, device="cpu")
    pool.kv_buffer.zero_()
    k, v = torch.randn(4, 2, 16), torch.randn(4, 2, 16)  # 4 个 token × 2 头 × 16 = 128 个数
    out_loc = torch.tensor([7, 100, 3, 508], dtype=torch.int32)
    layer_numel = 509 * 2 * 16  # 一层的 K（或 V）有 16288 个数

    def with_op(k, v):
        for layer in range(3):
            pool.store_kv(k * (layer + 1), v - layer, out_loc, layer)

    assert max(loop_lengths(with_op, k, v)) == 128  # 只有算 k、v 的那个循环
    for layer in range(3):
        assert torch.equal(pool.k_cache(layer)[out_loc.long()], k * (layer + 1))
        assert torch.equal(pool.v_cache(layer)[out_loc.long()], v - layer)

    def with_indexing(k, v):  # 第 17 章的写法：在这一层的视图上按下标赋值
        for layer in range(3):
            pool.k_cache(layer)[out_loc] = k * (layer + 1)
            pool.v_cache(layer)[out_loc] = v - layer

    # 对照：同样的写入，编译器为了"函数式"先把整层拷一份、改完再拷回去
    assert layer_numel in loop_lengths(with_indexing, k, v)


# ---------------------------------------------------------------- 错的版本
def test_a_positions_buffer_that_is_not_refreshed_gives_fluent_wrong_tokens(monkeypatch):
    """只把 input_ids 和 out_loc 拷进缓冲区、忘了 positions：图里读到的还是录制时的位置 0，
    每一步都把新 token 当成序列的第 0 个来做 RoPE。不报错、照样出词，只是和 HF 不同。"""

    def fill_without_positions(self, batch):
        bs = batch.padded_size
        self.input_ids[:bs].copy_(batch.input_ids)
        self.out_loc[:bs].copy_(batch.out_loc)

    monkeypatch.setattr(GraphInputs, "fill", fill_without_positions)
    path = tiny_qwen3()
    llm = make_llm(path, cuda_graph_bs=(1,), max_running_req=1)
    prompt = encode(path, TEXTS[2])
    out = llm.generate([prompt], SamplingParams(max_tokens=12, ignore_eos=True))[0]["token_ids"]
    llm.shutdown()
    reference = hf_greedy(path, prompt, 12)
    assert out[0] == reference[0]  # 第一个 token 来自 prefill，不走图
    assert out != reference
