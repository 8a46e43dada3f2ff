"""第 7 章：调度器与离线接口。贪心输出和 HF 逐 token 相同，调度设置怎么变都一样。"""

from __future__ import annotations

import pytest
import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.llm import LLM

TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,"]


@pytest.mark.parametrize("model", [smollm2, tiny_qwen3], ids=["smollm2", "tiny_qwen3"])
@pytest.mark.parametrize("rows,page_size,budget", [(2, 1, 8192), (8, 4, 8192), (3, 2, 8)])
def test_greedy_matches_hf_whatever_the_scheduling(model, rows, page_size, budget):
    path = model()
    llm = LLM(path, max_running_req=rows, page_size=page_size, max_extend_tokens=budget,
              num_page_override=256 // page_size, max_seq_len_override=64)
    max_tokens = [7, 3, 11, 5]
    prompts = [encode(path, t) for t in TEXTS]
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out["token_ids"] == hf_greedy(path, prompt, n)
    assert llm.page_allocator.num_free_pages == llm.engine.num_pages
    assert llm.table_manager.available_size == rows
    llm.shutdown()


def test_too_long_prompt_is_an_error_and_nothing_runs():
    llm = LLM(tiny_qwen3(), max_running_req=2, num_page_override=32, max_seq_len_override=32)
    with pytest.raises(ValueError, match="第 1 个提示"):
        llm.generate([[1, 2, 3], list(range(1, 31))], SamplingParams(max_tokens=4))
    assert not llm.runnable
    outs = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4, ignore_eos=True))
    assert len(outs[0]["token_ids"]) == 4
    llm.shutdown()
