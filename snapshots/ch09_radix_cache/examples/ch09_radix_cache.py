"""第 9 章的 main：同一段系统提示 + 几个问题，一个接一个地来。radix 缓存让后来的问题只算自己那几个 token。

MeteredLLM 在 LLM 上记下每次 prefill 命中了多少、算了多少，以及每个请求的首 token 时间；
本章页面上的演示都用它。
"""

from __future__ import annotations

import time

from minisgl.core import SamplingParams
from minisgl.llm import LLM

SYSTEM_PROMPT = (
    "You are a patient teaching assistant for an introductory course on computer systems. "
    "Students ask short questions about operating systems, networks, compilers and databases. "
    "Answer in plain English, in at most three sentences, and prefer a concrete example over a "
    "definition. If a question is ambiguous, state the most likely reading and answer that one. "
    "Never invent citations; if you are not sure, say so and suggest where the student could "
    "look it up. Use metric units, write numbers as digits, and avoid jargon unless the student "
    "used it first. When a question is about performance, mention what is being measured and on "
    "which kind of machine, because numbers without a setting mean little. Keep the tone "
    "friendly and direct, and do not repeat the question back to the student. If the student "
    "seems to be preparing for an exam, end with one short practice question on the same topic, "
    "and if the student pastes code, point to the exact line you are talking about before "
    "explaining what goes wrong there.\n"
)
QUESTIONS = [
    "What is a page table?",
    "Why does a cache miss cost time?",
    "What does a compiler do with a loop?",
    "How does TCP notice a lost packet?",
    "What is a database index?",
    "Why do threads need locks?",
    "What is virtual memory for?",
    "What is a context switch?",
]


def chat(question: str) -> str:
    return f"{SYSTEM_PROMPT}User: {question}\nAssistant:"


class MeteredLLM(LLM):
    """LLM，外加三份记录：每个 prefill 批里每个请求命中/计算了多少 token，每个请求的首 token 时间。"""

    def __init__(self, model_path, **config_fields) -> None:
        super().__init__(model_path, **config_fields)
        self.prefill_batches: list[list[tuple[int, int, int]]] = []  # 每批 [(uid, 命中, 计算)]
        self.ttft: dict[int, float] = {}  # uid -> 从 generate 开始到它的第一个 token 的秒数

    def _forward(self, forward_input):
        batch = forward_input.batch
        if batch.is_prefill:  # 前向发出之前记：发出时 complete_one 会改 cached_len
            self.prefill_batches.append([(r.uid, r.cached_len, r.extend_len) for r in batch.reqs])
        return super()._forward(forward_input)

    def step(self):
        outputs = super().step()
        now = time.perf_counter()
        for out in outputs:
            self.ttft.setdefault(out.uid, now - self._started)
        return outputs

    def generate(self, prompts, sampling_params=None):
        self._started = time.perf_counter()
        return super().generate(prompts, sampling_params)

    def prefill_of(self, uid: int) -> tuple[int, int]:
        """请求 uid 的 (命中 token 数, 计算 token 数)。"""
        return next((hit, new) for b in self.prefill_batches for u, hit, new in b if u == uid)

    @property
    def computed_tokens(self) -> int:
        return sum(new for b in self.prefill_batches for _, _, new in b)


def main() -> None:
    from minibook.hf import encode, hf_greedy
    from minibook.models import default_model, tiny_qwen3

    params = SamplingParams(max_tokens=8)
    for path, page_size in [(default_model(), 1), (tiny_qwen3(), 4)]:
        prompts = [encode(path, chat(q)) for q in QUESTIONS[:3]]
        print(f"== {path.name}，page_size={page_size}，系统提示 {len(encode(path, SYSTEM_PROMPT))} 个 token")
        llm = MeteredLLM(path, page_size=page_size, max_running_req=4,  # cache_type 默认就是 radix
                         num_page_override=512 // page_size, max_seq_len_override=512)
        for uid, ids in enumerate(prompts):  # 一个接一个地来：前一个结束了才来下一个
            out = llm.generate([ids], params)[0]
            hit, new = llm.prefill_of(uid)
            same = out["token_ids"] == hf_greedy(path, ids, params.max_tokens)
            assert same, f"第 {uid} 个问题与 HF 不一致"
            print(f"  问题 {uid}：提示 {len(ids)} 个 token，命中 {hit:3d}，计算 {new:3d}；"
                  f"与 HF 一致：{same}")
        assert llm.prefill_of(0)[0] == 0 and all(llm.prefill_of(uid)[0] > 0 for uid in (1, 2))
        llm.cache_manager.check_integrity()
        print(f"  空闲时自检通过；缓存 {llm.cache_manager.prefix_cache.size_info}")
        llm.shutdown()

if __name__ == "__main__":
    main()
