"""第 20 章的测量（不是测试）：MoE 层的两个后端各要多久，专家 TP 与专家并行各分到多少活、通信多少。

- layer_times：一个 MoE 层（路由之后的专家计算），loop 对 fused，token 数 1…512；两种形状：
  书里的小 MoE 和 Qwen3-30B-A3B 的一层（128 个专家选 8 个，float32 权重 2.4 GB，随机数）；
- experts_touched：decode 一步要读几个专家的权重——批越大，碰到的专家越多（实测的路由，和均匀路由的期望比）；
- communication：真的起两个 rank（专家 TP 或 EP=2），数每个 MoE 层每一步的 all_reduce 次数和字节、
  每个 rank 实际算了几个 (token, 专家) 格子；
- split_table：Qwen3-30B-A3B 在 8 个 rank 上，专家 TP 与专家并行时每个 rank 存多少、每次矩阵乘多大。

数字随机器和负载而变，比值才有意义。

    python examples/ch20_bench.py
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from minibook.hf import encode
from minibook.models import qwen3_30b_a3b_config, tiny_qwen3_moe
from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.models import ModelConfig
from minisgl.moe import FusedMoe, LoopMoe, select_experts

TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
REPEATS = 5
TEXT = ("Large language models generate text one token at a time. During the prefill phase the whole prompt "
        "is processed at once; afterwards, each decoding step feeds a single new token and reuses the keys "
        "and values that were cached for the earlier positions.")


def shapes() -> dict[str, tuple[int, int, int, int]]:
    """(hidden, 每个专家的中间维, 专家数, top-k)：书里的小 MoE 与 Qwen3-30B-A3B。"""
    out = {}
    for name, config in (("小 MoE", ModelConfig.from_json(tiny_qwen3_moe())),
                         ("Qwen3-30B-A3B", ModelConfig.from_json(qwen3_30b_a3b_config()))):
        out[name] = (config.hidden_size, config.moe_intermediate_size, config.num_experts, config.num_experts_per_tok)
    return out


def median_seconds(fn, repeats: int = REPEATS) -> float:
    fn()  # 预热
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def layer_times(name: str, tokens=TOKENS) -> list[dict]:
    """一个 MoE 层，随机权重和输入：每个 token 数下 loop、fused 各自的中位数（毫秒）。"""
    hidden, inter, experts, k = shapes()[name]
    gen = torch.Generator().manual_seed(0)
    w1 = torch.empty(experts, 2 * inter, hidden).normal_(0, 0.02, generator=gen)
    w2 = torch.empty(experts, hidden, inter).normal_(0, 0.02, generator=gen)
    router = torch.randn(experts, hidden, generator=gen)
    loop, fused = LoopMoe(), FusedMoe()
    rows = []
    for n in tokens:
        x = torch.randn(n, hidden, generator=gen)
        weights, ids = select_experts(x @ router.T, k, True)
        same = torch.allclose(loop.forward(x, w1, w2, weights, ids), fused.forward(x, w1, w2, weights, ids),
                              rtol=1e-4, atol=1e-5)
        rows.append({"tokens": n, "experts_hit": len(set(ids.flatten().tolist())), "same": same,
                     "loop_ms": median_seconds(lambda: loop.forward(x, w1, w2, weights, ids)) * 1e3,
                     "fused_ms": median_seconds(lambda: fused.forward(x, w1, w2, weights, ids)) * 1e3})
    return rows


def experts_touched(batches=(1, 4, 16, 64)) -> list[dict]:
    """decode 一步要读几个专家：B 个 token 各选 k 个，至少有一个 token 选中的专家数。
    实测：在小 MoE 上真的跑 B 个请求一批的 decode，数每一步每一层；期望：路由均匀时 E·(1 − (1 − k/E)^B)。"""
    path = tiny_qwen3_moe()
    rows = []
    for b in batches:
        llm = LLM(path, max_running_req=b, num_page_override=64 * b + 64, max_seq_len_override=64)
        config = llm.engine.model_config
        e, k = config.num_experts, config.num_experts_per_tok
        hit: list[int] = []
        layer = llm.engine.model.model.layers[1].mlp.experts
        forward = layer.forward

        def counting(x, router_logits, forward=forward):
            if x.shape[0] == b and llm.engine.ctx.batch.is_decode:
                hit.append(len(set(select_experts(router_logits, k, True)[1].flatten().tolist())))
            return forward(x, router_logits)

        layer.forward = counting
        prompts = [encode(path, f"{TEXT[: 40 + 7 * i]}") for i in range(b)]
        llm.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True))
        llm.engine.synchronize()
        llm.shutdown()
        rows.append({"batch": b, "measured": statistics.mean(hit), "expected": e * (1 - (1 - k / e) ** b),
                     "experts": e})
    return rows


def _rank_main(rank: int, size: int, port: int, ep_size: int, out) -> None:
    """一个 rank 进程：包住通信和 MoE 层，生成一段文字，把记录交回去。"""
    from minisgl.distributed import DistributedCommunicator, DistributedInfo
    from minisgl.layers import MoELayer

    log: list[tuple] = []  # ("all_reduce", 字节) 或 ("moe", 层号, 本 rank 算的格子数)
    impl = type(DistributedCommunicator.plugins[-1])
    all_reduce, moe_forward = impl.all_reduce, MoELayer.forward

    def counted_all_reduce(self, x):
        log.append(("all_reduce", x.numel() * x.element_size()))
        return all_reduce(self, x)

    def counted_moe(self, x, router_logits):
        ids = self.local_ids(select_experts(router_logits, self.top_k, self.renormalize)[1])
        log.append(("moe", id(self), int((ids >= 0).sum())))
        return moe_forward(self, x, router_logits)

    impl.all_reduce, MoELayer.forward = counted_all_reduce, counted_moe
    path = tiny_qwen3_moe()
    llm = LLM(path, tp_info=DistributedInfo(rank, size), distributed_port=port, ep_size=ep_size,
              num_page_override=512, max_seq_len_override=256)
    log.clear()
    llm.generate([encode(path, TEXT)], SamplingParams(max_tokens=8, ignore_eos=True))
    llm.shutdown()
    out.put((rank, log))


def communication(ep_size: int, size: int = 2) -> dict:
    """size 个 rank（每个一个进程）跑小 MoE：每个 MoE 层每一步跟着几次 all_reduce、多少字节，各 rank 算了几格。"""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, size, port, ep_size, queue)) for r in range(size)]
    for p in procs:
        p.start()
    logs = dict(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    per_rank = {}
    for rank, log in sorted(logs.items()):
        moe_all_reduces, moe_bytes, slots = 0, 0, 0
        for i, entry in enumerate(log):
            if entry[0] == "moe":
                slots += entry[2]
                nxt = log[i + 1] if i + 1 < len(log) else None  # MoE 层的 all_reduce 紧跟在它后面
                if nxt is not None and nxt[0] == "all_reduce":
                    moe_all_reduces += 1
                    moe_bytes += nxt[1]
        moe_calls = sum(1 for e in log if e[0] == "moe")
        per_rank[rank] = {"moe_calls": moe_calls, "all_reduces_after_moe": moe_all_reduces,
                          "all_reduce_bytes": moe_bytes, "slots": slots,
                          "all_reduces": sum(1 for e in log if e[0] == "all_reduce")}
    return per_rank


def split_table(ranks: int = 8) -> dict:
    """Qwen3-30B-A3B 的一个 MoE 层放在 ranks 个 rank 上：专家 TP 与专家并行各自的形状和字节（bf16）。"""
    c = ModelConfig.from_json(qwen3_30b_a3b_config())
    layer_params = c.num_experts * 3 * c.hidden_size * c.moe_intermediate_size
    tp_inter = c.moe_intermediate_size // ranks
    return {
        "ranks": ranks, "layer_gb": layer_params * 2 / 1e9,
        "tp": {"experts": c.num_experts, "gemm": f"[n, {c.hidden_size}] × [{c.hidden_size}, {2 * tp_inter}]",
               "per_rank_gb": layer_params * 2 / ranks / 1e9},
        "ep": {"experts": c.num_experts // ranks,
               "gemm": f"[n, {c.hidden_size}] × [{c.hidden_size}, {2 * c.moe_intermediate_size}]",
               "per_rank_gb": layer_params * 2 / ranks / 1e9},
        "all_reduce_bytes_per_token": c.hidden_size * 2,
    }


def main() -> None:
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    print(f"{torch.get_num_threads()} 个线程；开始时 1 分钟平均负载 {os.getloadavg()[0]:.1f}\n")
    for name in shapes():
        print(f"一个 MoE 层（{name}），每次调用的中位数：")
        for r in layer_times(name):
            print(f"  {r['tokens']:>4} 个 token（碰到 {r['experts_hit']:>3} 个专家）：loop {r['loop_ms']:8.2f} ms  "
                  f"fused {r['fused_ms']:8.2f} ms  快 {r['loop_ms'] / r['fused_ms']:.2f} 倍  结果一致 {r['same']}")
    for r in experts_touched():
        print(f"批 {r['batch']:>2}：decode 一步平均碰到 {r['measured']:.1f} / {r['experts']} 个专家（均匀路由的期望 "
              f"{r['expected']:.1f}）")
    for ep_size in (1, 2):
        for rank, r in communication(ep_size).items():
            print(f"{'EP=2' if ep_size == 2 else '专家 TP=2'}，rank {rank}：MoE 层被调用 {r['moe_calls']} 次，"
                  f"其后各一次 all_reduce（{r['all_reduces_after_moe']} 次，共 {r['all_reduce_bytes']} 字节），"
                  f"算了 {r['slots']} 个格子")
    print(split_table())


if __name__ == "__main__":
    main()
