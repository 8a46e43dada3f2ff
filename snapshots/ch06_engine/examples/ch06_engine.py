"""第 6 章的 main：用 Engine 把几个长短不一的提示放进同一批，先 prefill、再逐步 decode。

调度器要到第 7 章才写，这里的 MiniScheduler 是一个手写的替身：页表的行（TableManager）
和 KV 页（PageAllocator）都归它，不归 Engine。它把这一步要算的 token 拼成一批交给 Engine，
再把结果记回请求。最后和 Hugging Face 逐 token 对答案，两个模型都对。

    python examples/ch06_engine.py                     # 默认：SmolLM2 与 tiny Qwen3
    MINISGL_MODEL=/path/to/Qwen3-0.6B python examples/ch06_engine.py   # 换成你手里的真权重
"""

from __future__ import annotations

import torch

from minisgl.core import Batch, Req, SamplingParams
from minisgl.engine import Engine, EngineConfig
from minisgl.kvcache import OutOfPagesError, PageAllocator
from minisgl.scheduler.table import TableManager


class MiniScheduler:
    """第 7 章调度器的替身：管页表的行和 KV 页，拼批，驱动 Engine。"""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.table = TableManager(engine.config.max_running_req, engine.page_table)
        # 分配器绑定在 Engine 的页表上；页数是 Engine 定的，占位页不在其中
        self.allocator = PageAllocator(engine.num_pages, engine.config.page_size, engine.page_table)

    def add(self, prompt: list[int], params: SamplingParams, uid: int) -> Req:
        """新请求：占一行页表，把提示写进 token 池。太长的请求在这里就拒绝。"""
        if len(prompt) + params.max_tokens > self.engine.max_seq_len:
            raise ValueError(f"提示 {len(prompt)} + 生成 {params.max_tokens} 个 token 超过了 "
                             f"max_seq_len={self.engine.max_seq_len}")
        row = self.table.allocate()
        ids = torch.tensor(prompt, dtype=torch.int32)
        host = ids.pin_memory() if self.engine.stream is not None else ids  # GPU 上异步拷
        self.table.token_pool[row, : len(prompt)].copy_(host, non_blocking=True)
        return Req(input_ids=ids, table_idx=row, cached_len=0, output_len=params.max_tokens,
                   uid=uid, sampling_params=params, cache_handle=None)

    def prepare_batch(self, reqs: list[Req], phase: str) -> Batch:
        """把这一步要算的 token 拼成一批：out_loc、input_ids、positions，再准备注意力元数据。"""
        batch = Batch(reqs, phase)  # type: ignore[arg-type]
        # 整批一起分配：页不够就抛 OutOfPagesError，页表和空闲页都不变
        batch.out_loc = self.allocator.alloc_slots(reqs)
        pool, device = self.table.token_pool, self.engine.device
        batch.input_ids = torch.cat([pool[r.table_idx, r.cached_len:r.device_len]
                                     for r in reqs]).long()
        batch.positions = torch.cat([torch.arange(r.cached_len, r.device_len, device=device)
                                     for r in reqs])
        batch.padded_reqs = reqs
        self.engine.attn_backend.prepare_metadata(batch)
        return batch

    def step(self, reqs: list[Req], phase: str) -> list[int]:
        """一步：拼批、前向（Engine 在发射时已替请求记账）、收结果。返回每个请求的新 token。"""
        batch = self.prepare_batch(reqs, phase)
        out = self.engine.forward_batch(batch, self.engine.sampler.prepare(batch))
        for i, req in enumerate(reqs):  # 新 token 在设备上写进 token 池，下一步从这里取
            self.table.token_pool[req.table_idx, req.device_len - 1] = out.next_tokens[i]
        if out.copy_done is not None:  # GPU 上拷回 CPU 是异步的：等它完成再读 CPU 副本
            out.copy_done.synchronize()
        tokens = out.next_tokens_cpu.tolist()
        for req, token in zip(reqs, tokens):
            req.append_host(token)
            if not req.can_decode:  # 到了 max_tokens：还回 KV 页和页表的行
                # 最后采样出的那个 token 没进过模型，占了槽位的只有 [0, cached_len)
                self.allocator.free_slots(req.table_idx, req.cached_len)
                self.table.free(req.table_idx)
        return tokens

    def generate(
        self, prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[list[int]], list[int]]:
        """所有提示一起 prefill，之后每步把还没结束的请求拼成一批 decode。

        返回每个请求生成的 token，以及每一步的批大小（看得出请求陆续结束、批在变小）。
        为了和 HF 逐 token 比较，这里不在 EOS 处停，只按 max_tokens 结束。
        """
        reqs = [self.add(p, sp, uid) for uid, (p, sp) in enumerate(zip(prompts, params))]
        outputs: list[list[int]] = [[] for _ in reqs]
        batch_sizes: list[int] = []
        running, phase = reqs, "prefill"
        while running:
            for req, token in zip(running, self.step(running, phase)):
                outputs[req.uid].append(token)
            batch_sizes.append(len(running))
            running, phase = [req for req in running if req.can_decode], "decode"
        return outputs, batch_sizes


def generate(engine: Engine, prompts: list[list[int]], params: list[SamplingParams]):
    """一次性用法：新建一个迷你调度器跑完这些请求。"""
    return MiniScheduler(engine).generate(prompts, params)


def main() -> None:
    from minibook.hf import decode, encode, hf_greedy
    from minibook.models import default_model, tiny_qwen3

    texts = ["The capital of France is", "Once upon a time,",
             "def fibonacci(n):", "Water boils at a temperature of"]
    max_tokens = [12, 6, 10, 3]  # 长短不一：请求会陆续结束
    for path in [default_model(), tiny_qwen3()]:
        engine = Engine(EngineConfig(model_path=path, max_running_req=8,
                                     num_page_override=64, page_size=4, max_seq_len_override=64))
        sched = MiniScheduler(engine)
        prompts = [encode(path, t) for t in texts]
        params = [SamplingParams(max_tokens=n) for n in max_tokens]
        outputs, sizes = sched.generate(prompts, params)
        print(f"== {path.name}：{len(prompts)} 个请求，"
              f"KV 池 {engine.num_pages} 页 × 4 token（另有 1 页占位页）")
        print(f"每一步的批大小：{sizes}")
        for prompt, text, out, n in zip(prompts, texts, outputs, max_tokens):
            same = out == hf_greedy(path, prompt, n)
            assert same, f"{path.name} 上 {text!r} 的输出和 HF 不一致"
            print(f"  {text!r} → {decode(path, out)!r}  与 HF 一致：{same}")
        assert sched.allocator.num_free_pages == engine.num_pages  # 全部还回来了
        print(f"结束后空闲页：{sched.allocator.num_free_pages} / {engine.num_pages}")
        engine.shutdown()

    # 页不够的一批：整批拒绝，什么都不改
    path = tiny_qwen3()
    engine = Engine(EngineConfig(model_path=path, max_running_req=4, num_page_override=3,
                                 page_size=4, max_seq_len_override=12))
    sched = MiniScheduler(engine)
    reqs = [sched.add(list(range(100, 108)), SamplingParams(max_tokens=2), uid) for uid in range(2)]
    table_before = engine.page_table.clone()
    try:
        sched.prepare_batch(reqs, "prefill")
        raise AssertionError("两个 8 token 的提示要 4 页，3 页的池子不该放得下")
    except OutOfPagesError as e:
        print(f"页不够：{e}")
    assert sched.allocator.num_free_pages == 3 and torch.equal(engine.page_table, table_before)
    assert all(r.cached_len == 0 and r.device_len == 8 for r in reqs)
    print(f"  失败之后：空闲页 {sched.allocator.num_free_pages} / 3，页表没变，请求的记账没变")
    engine.shutdown()

    # 随机采样：同一个种子、同样的输入，结果完全一样；换一个种子就不同
    path = default_model()
    sampled = []
    for seed in (0, 0, 1):
        engine = Engine(EngineConfig(model_path=path, max_running_req=8, num_page_override=64,
                                     page_size=4, max_seq_len_override=64, seed=seed))
        params = [SamplingParams(temperature=0.8, top_k=50, top_p=0.9, max_tokens=12),
                  SamplingParams(max_tokens=12)]  # 同一批里混一个贪心请求
        outputs, _ = generate(engine, [encode(path, texts[1])] * 2, params)
        sampled.append(outputs)
        engine.shutdown()
    assert sampled[0] == sampled[1] and sampled[0][0] != sampled[2][0]
    assert sampled[0][1] == sampled[2][1] == hf_greedy(path, encode(path, texts[1]), 12)
    print("采样：种子相同 → 结果相同；种子不同 → 采样的请求结果不同；同批的贪心请求始终与 HF 一致")


if __name__ == "__main__":
    main()
