"""离线压测：把整批请求一次交给 LLM.generate，量从交出到全部生成完的时间。"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from minisgl.core import SamplingParams

from .workload import BenchRequest


@dataclass(frozen=True)
class OfflineResult:
    requests: int
    input_tokens: int
    output_tokens: int
    seconds: float
    outputs: list[list[int]] = field(default_factory=list, repr=False)  # 每个请求生成的 token id，和请求同序

    @property
    def output_throughput(self) -> float:
        """每秒生成几个 token（nano-vllm 报的就是这个数）。"""
        return self.output_tokens / self.seconds

    @property
    def total_throughput(self) -> float:
        """每秒处理几个 token：提示和生成的合在一起。"""
        return (self.input_tokens + self.output_tokens) / self.seconds


def run_offline(llm, workload: list[BenchRequest], temperature: float = 0.0) -> OfflineResult:
    """llm 是 minisgl.llm.LLM；每个请求都 ignore_eos，正好生成 max_tokens 个 token。"""
    params = [SamplingParams(temperature=temperature, max_tokens=r.max_tokens, ignore_eos=True) for r in workload]
    start = time.perf_counter()
    outs = llm.generate([r.prompt_ids for r in workload], params)
    seconds = time.perf_counter() - start
    produced = [len(o["token_ids"]) for o in outs]
    assert produced == [r.max_tokens for r in workload], "ignore_eos 的请求应当正好生成 max_tokens 个 token"
    return OfflineResult(len(workload), sum(len(r.prompt_ids) for r in workload), sum(produced), seconds,
                         [o["token_ids"] for o in outs])
