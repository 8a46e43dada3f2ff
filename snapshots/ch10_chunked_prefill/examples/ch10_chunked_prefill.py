"""第 10 章的 main：分块 prefill。每步最多算 max_extend_tokens 个提示 token，长提示切成几块，
被切开的请求下一步回到队首接着算；块大小怎么取，贪心输出都和 Hugging Face 逐 token 相同。

    python examples/ch10_chunked_prefill.py
    MINISGL_MODEL=/path/to/Qwen3-0.6B python examples/ch10_chunked_prefill.py   # 换成你手里的真权重
"""

from __future__ import annotations

import torch

from minisgl.core import Batch, SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler.prefill import ChunkedReq

LONG = ("Chunked prefill splits a long prompt into pieces so that one step never computes more "
        "than a fixed number of tokens. The scheduler keeps the unfinished request at the head of "
        "the queue and continues it in the next step. Question: what stays at the head?")
TEXTS = [LONG, "The capital of France is", "def add(a, b):", "Once upon a time,"]
MAX_TOKENS = [8, 6, 10, 4]


class TracingLLM(LLM):
    """记下每一批：阶段，以及每个请求这一步算的位置 [cached_len, device_len)、是不是只算了一块。"""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.trace: list[tuple[str, list[tuple[int, int, int, bool]]]] = []

    def _prepare_batch(self, batch: Batch):
        self.trace.append((batch.phase, [(r.uid, r.cached_len, r.device_len, isinstance(r, ChunkedReq))
                                         for r in batch.reqs]))
        return super()._prepare_batch(batch)


def show_prefill_steps(llm: TracingLLM, names: dict[int, str] | None = None) -> None:
    """打印每一步 prefill 算了谁的哪一段；names 把 uid 换成好认的名字。"""
    names = names or {}
    for i, (phase, items) in enumerate(llm.trace):
        if phase != "prefill":
            continue
        parts = [f"请求 {names.get(uid, uid)} [{start}, {end})" + ("（一块）" if chunked else "")
                 for uid, start, end, chunked in items]
        print(f"  第 {i + 1} 步 prefill，{sum(e - s for _, s, e, _ in items)} 个 token：" + "，".join(parts))


def phases(llm: TracingLLM) -> str:
    """每一步的阶段：P 是 prefill，D 是 decode。"""
    return "".join("P" if phase == "prefill" else "D" for phase, _ in llm.trace)


def main() -> None:
    from minibook.hf import encode, hf_greedy
    from minibook.models import default_model, tiny_qwen3

    for path in [default_model(), tiny_qwen3()]:
        prompts = [encode(path, t) for t in TEXTS]
        refs = [hf_greedy(path, p, n) for p, n in zip(prompts, MAX_TOKENS)]
        params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in MAX_TOKENS]
        print(f"== {path.name}：提示长 {[len(p) for p in prompts]} 个 token")
        for budget in (1, 7, 16, 64) if path == tiny_qwen3() else (1, 7, 64):
            llm = TracingLLM(path, max_running_req=4, page_size=4, num_page_override=128,
                             max_seq_len_override=128, max_extend_tokens=budget)
            outs = llm.generate(prompts, params)
            same = all(o["token_ids"] == r for o, r in zip(outs, refs))
            assert same, f"{path.name}：块大小 {budget} 时输出和 HF 不一致"
            llm.cache_manager.check_integrity()  # 页全部还回来了（或者只在前缀缓存里）
            n_prefill = phases(llm).count("P")
            print(f"  max_extend_tokens={budget:>2}：{n_prefill:>3} 步 prefill，"
                  f"{len(llm.trace) - n_prefill} 步 decode，4 个请求都与 HF 一致：{same}")
            if budget == 16 and path == tiny_qwen3():
                show_prefill_steps(llm)
            llm.shutdown()

    # 在跑的请求 decode 时来了长提示：上游的策略块接着块，另一种在两块之间插一步 decode
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS]
    for between in (False, True):
        llm = TracingLLM(path, max_running_req=4, page_size=4, num_page_override=128,
                         max_seq_len_override=128, max_extend_tokens=20, decode_between_chunks=between)
        for uid in (1, 2, 3):  # 三个短请求先跑起来（一步 prefill、一步 decode）
            llm.add_req(uid, torch.tensor(prompts[uid]), SamplingParams(max_tokens=12, ignore_eos=True))
        llm.step()
        llm.step()
        llm.add_req(0, torch.tensor(prompts[0]), SamplingParams(max_tokens=4, ignore_eos=True))
        long_out = []
        while llm.runnable:
            long_out += [out.next_token for out in llm.step() if out.uid == 0]
        assert long_out == hf_greedy(path, prompts[0], 4)
        name = "两块之间 decode 一步" if between else "prefill 优先（上游）"
        print(f"{name}：每一步 {phases(llm)}")
        llm.shutdown()


if __name__ == "__main__":
    main()
