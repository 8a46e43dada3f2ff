"""第 17 章：元数据缓冲区的竞态（上游 #103 的 CPU 版）。

“每步都新建几个小张量太浪费，预先分配一块缓冲区，每步写进去”——重叠调度下，调度器线程写
第 N+1 批的元数据时，工作线程上第 N 批的前向还没跑完，它后面的层读到的是第 N+1 批的长度。
上游的 FlashInfer 后端也是这样坏的：plan() 重用一块锁页内存做异步拷贝的中转，下一次 plan()
在拷贝完成前就改写了它。规矩：一块缓冲区只要还有在途的批次读它，主机就不能写；要么每步用新张量
（本章的 paged 后端），要么把“写进缓冲区”也排到流上，跟在上一批的前向后面（第 18 章的静态输入）。

四种写法各跑一遍同样的请求，和 HF 的贪心结果比。
"""

from __future__ import annotations

import os
import threading

import torch

from minibook.hf import encode, hf_greedy
from minibook.models import tiny_qwen3
from minisgl.attention import PagedAttnBackend, PagedAttnMetadata
from minisgl.core import SamplingParams
from minisgl.llm import LLM

TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,"]
MAX_TOKENS = 12


def packed(batch) -> torch.Tensor:
    reqs = batch.padded_reqs
    indptr = [0]
    for r in reqs:
        indptr.append(indptr[-1] + r.extend_len)
    return torch.tensor([r.table_idx for r in reqs] + [r.device_len for r in reqs] + indptr,
                        dtype=torch.int32)


def views(buffer: torch.Tensor, B: int) -> PagedAttnMetadata:
    return PagedAttnMetadata(rows=buffer[:B], seq_lens_k=buffer[B: 2 * B], qo_indptr=buffer[2 * B: 3 * B + 1])


class Magnified(PagedAttnBackend):
    """放大镜：每一批的第 0 层先等一等，直到下一批的元数据写完（最多 0.5 秒）。

    重叠时，下一批的 plan 本来就发生在这一批前向的某个时刻；这里让它每次都落在前向读元数据之前，
    演示的结果就不靠运气。不重叠时下一批的 plan 在前向之后，这里等满 0.5 秒再继续，结果不变。
    """

    def __init__(self, engine) -> None:
        super().__init__(engine.kv_cache, engine.page_table)
        self.engine = engine
        self.planned = threading.Event()

    def prepare_metadata(self, batch) -> None:
        self.plan(batch)
        self.planned.set()

    def plan(self, batch) -> None:
        super().prepare_metadata(batch)  # 每步新张量：paged 后端本身的做法

    def forward(self, q, k, v, layer_id, batch):
        if layer_id == 0:
            self.planned.clear()
            self.planned.wait(timeout=0.5)
        return super().forward(q, k, v, layer_id, batch)


class ReusedBuffer(Magnified):
    """错的：调度器线程当场改写同一块缓冲区，不管在途的那一批还在不在读它。"""

    def __init__(self, engine) -> None:
        super().__init__(engine)
        self.buffer = torch.zeros(3 * engine.page_table.shape[0] + 1, dtype=torch.int32)

    def plan(self, batch) -> None:
        values = packed(batch)
        self.buffer[: len(values)] = values  # 在调度器线程上，此刻工作线程可能正在跑上一批
        batch.attn_metadata = views(self.buffer, len(batch.padded_reqs))


class WrittenOnTheStream(ReusedBuffer):
    """对的：同一块缓冲区，但“写进去”排在工作线程上，一定在上一批的前向之后、这一批的前向之前。"""

    def plan(self, batch) -> None:
        values = packed(batch)  # 新张量，只有这一次写入用它
        self.engine.enqueue(self.buffer[: len(values)].copy_, values)
        batch.attn_metadata = views(self.buffer, len(batch.padded_reqs))


def run(path, prompts, make_backend) -> tuple[list[list[int]] | None, str]:
    llm = LLM(path, max_running_req=4, page_size=1, num_page_override=256, max_seq_len_override=64,
              attention_backend="paged")
    backend = make_backend(llm.engine)
    llm.engine.attn_backend = llm.engine.ctx.attn_backend = backend
    try:
        outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
        result = [o["token_ids"] for o in outs], ""
    except RuntimeError as e:  # 错的版本可能让算子当场报错：错误从工作线程传回 generate
        result = None, f"{type(e).__name__}: {str(e).splitlines()[0]}"
    try:
        llm.shutdown()
    except RuntimeError:  # 工作线程上的错误是“粘住”的，关机时会再抛一次：上面已经记下了
        pass
    return result


def main() -> None:
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS]
    want = [hf_greedy(path, p, MAX_TOKENS) for p in prompts]
    print(f"tiny Qwen3，{len(prompts)} 个请求一起 prefill、再 decode {MAX_TOKENS - 1} 步，和 HF 的贪心结果比")
    cases = [("重叠，每步新张量（paged 后端本身）", False, Magnified),
             ("重叠，重用缓冲区，调度器线程当场写", False, ReusedBuffer),
             ("重叠，重用缓冲区，写入排在工作线程上", False, WrittenOnTheStream),
             ("不重叠，重用缓冲区，当场写", True, ReusedBuffer)]
    agree = {}
    for name, no_overlap, make in cases:
        if no_overlap:
            os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"
        else:
            os.environ.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING", None)
        got, error = run(path, prompts, make)
        agree[name] = got == want
        if got is None:
            verdict = f"出错：{error}"
        else:
            verdict = f"与 HF 一致的请求 {sum(g == w for g, w in zip(got, want))}/{len(want)}"
        print(f"  {name}\n    {verdict}")
    assert [agree[name] for name, _, _ in cases] == [True, False, True, True]


if __name__ == "__main__":
    main()
