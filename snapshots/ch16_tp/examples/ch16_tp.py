"""第 16 章：张量并行下每个 rank 拿到的权重形状；真实的多进程（gloo）前向与单进程比较，并数通信次数。

两部分：
1. Qwen3-0.6B 的形状表：按随仓库提交的 config.json 在 meta 设备上建出完整形状，用 shard_tensor 切出
   TP=2、TP=16 时 rank 0 的那一份（MINISGL_MODEL 指向真实的 Qwen3 权重时，改读真实权重的形状）。
2. 每个 TP 配置起 size 个进程，每个进程一个 Engine（TP=1 也是一个进程），算同一批提示的 prefill；
   报告每个 rank 的 qkv_proj 形状、KV 池每层的形状、一次前向里 all_reduce / all_gather 的次数、
   logits 与 TP=1 的最大差，以及贪心生成的 token 是否与 TP=1 相同。
"""

from __future__ import annotations

import os
import socket
import sys

import torch
import torch.multiprocessing as mp

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):"]
NEW_TOKENS = 8
SHAPE_NAMES = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
               "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.o_proj.weight",
               "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight",
               "model.layers.0.input_layernorm.weight"]


def full_shapes(config_path: str) -> dict[str, tuple[int, ...]]:
    """按 config.json 算出这几个权重的完整形状（和 HF 的 checkpoint 一样）。"""
    from minisgl.models import ModelConfig

    c = ModelConfig.from_json(config_path)
    q, kv = c.num_qo_heads * c.head_dim, c.num_kv_heads * c.head_dim
    return {"model.embed_tokens.weight": (c.vocab_size, c.hidden_size),
            "model.layers.0.self_attn.q_proj.weight": (q, c.hidden_size),
            "model.layers.0.self_attn.k_proj.weight": (kv, c.hidden_size),
            "model.layers.0.self_attn.o_proj.weight": (c.hidden_size, q),
            "model.layers.0.mlp.gate_proj.weight": (c.intermediate_size, c.hidden_size),
            "model.layers.0.mlp.down_proj.weight": (c.hidden_size, c.intermediate_size),
            "model.layers.0.input_layernorm.weight": (c.hidden_size,)}


def show_shapes() -> None:
    from minibook.models import qwen3_06b_config
    from minisgl.models import ModelConfig, shard_tensor

    real = os.environ.get("MINISGL_MODEL")
    if real and ModelConfig.from_json(real).num_qo_heads == 16:  # 读者手上的真实 Qwen3 权重
        from safetensors import safe_open

        source = f"真实权重 {real}"
        tensors = {}
        for file in sorted(os.listdir(real)):
            if file.endswith(".safetensors"):
                with safe_open(os.path.join(real, file), "pt") as f:
                    tensors.update({n: f.get_slice(n) for n in SHAPE_NAMES if n in f.keys()})
        num_kv = ModelConfig.from_json(real).num_kv_heads
    else:
        config = qwen3_06b_config()
        source = "config.json，meta 张量（不读权重）"
        tensors = {n: torch.empty(s, device="meta") for n, s in full_shapes(str(config.parent)).items()}
        num_kv = ModelConfig.from_json(config.parent).num_kv_heads

    def shape(t) -> str:
        return "×".join(map(str, t.shape if isinstance(t, torch.Tensor) else t.get_shape()))

    print(f"Qwen3-0.6B 每个 rank 的权重形状（{source}）")
    print(f"{'权重':<34}{'完整':>14}{'TP=2 rank 0':>14}{'TP=16 rank 0':>14}")
    for name in SHAPE_NAMES:
        cells = [shape(shard_tensor(name, tensors[name], 0, tp, num_kv)) for tp in (2, 16)]
        print(f"{name.removeprefix('model.'):<34}{shape(tensors[name]):>14}{cells[0]:>14}{cells[1]:>14}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank: int, size: int, port: int, model_path: str, out, reversed_on: int | None) -> None:
    """一个 rank 的进程：建 LLM（内含 Engine），数通信，记下第一次前向（prefill）的 logits。

    reversed_on：这个 rank 把提示倒过来排（故意让它的批和别的 rank 顺序不同，演示用）。
    """
    from minisgl.core import SamplingParams
    from minisgl.distributed import DistributedCommunicator, DistributedInfo
    from minisgl.llm import LLM

    llm = LLM(model_path, tp_info=DistributedInfo(rank, size), distributed_port=port,
              num_page_override=512, max_seq_len_override=128, max_running_req=len(PROMPTS))
    counts = {"all_reduce": 0, "all_gather": 0}
    impl = DistributedCommunicator.plugins[-1]
    for op in counts:  # 包一层计数：层调用的正是 plugins[-1] 的这两个方法
        def counted(x, _fn=getattr(impl, op), _op=op):
            counts[_op] += 1
            return _fn(x)
        setattr(impl, op, counted)
    first = {}
    sample = llm.engine.sampler.sample

    def record_first(logits, args):  # 第一次采样时的 logits 就是 prefill 的结果
        if not first:
            first.update(logits=logits.clone(), counts=dict(counts))
        return sample(logits, args)

    llm.engine.sampler.sample = record_first
    prompts = PROMPTS[::-1] if rank == reversed_on else PROMPTS
    outs = llm.generate(prompts, SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True))
    if rank == reversed_on:
        outs = outs[::-1]  # 按原来的提示顺序交回去，方便比较
    layer0 = llm.engine.model.model.layers[0]
    out.put({"rank": rank, "qkv": tuple(layer0.self_attn.qkv_proj.weight.shape),
             "kv_pool": tuple(llm.engine.kv_cache.k_cache(0).shape), "counts": first["counts"],
             "logits": first["logits"].numpy(), "tokens": [o["token_ids"] for o in outs],
             "threads": torch.get_num_threads()})
    llm.shutdown()


def run_tp(model_path: str, size: int, reversed_on: int | None = None) -> list[dict]:
    """起 size 个 rank 进程，等它们都交回结果（按 rank 排好）。"""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, size, port, model_path, out, reversed_on))
             for r in range(size)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=600) for _ in range(size)]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    if any(p.exitcode != 0 for p in procs):
        sys.exit(f"有 rank 进程出错退出：{[p.exitcode for p in procs]}")
    return sorted(results, key=lambda r: r["rank"])


def compare(name: str, model_path: str, sizes: list[int]) -> None:
    from minisgl.models import ModelConfig

    c = ModelConfig.from_json(model_path)
    print(f"\n{name}：{c.num_layers} 层，{c.num_qo_heads} 个 q 头、{c.num_kv_heads} 个 KV 头，"
          f"一批 {len(PROMPTS)} 个提示")
    base = run_tp(model_path, 1)[0]
    print(f"{'TP':>3}{'rank':>5}{'线程':>5}{'qkv_proj':>12}{'KV 池每层':>18}{'all_reduce':>11}"
          f"{'all_gather':>11}{'max|Δlogits|':>14}  贪心 token 与 TP=1")
    for size in [1, *sizes]:
        results = [base] if size == 1 else run_tp(model_path, size)
        for r in results:
            delta = abs(r["logits"] - base["logits"]).max()
            same = "相同" if r["tokens"] == base["tokens"] else "不同！"
            print(f"{size:>3}{r['rank']:>5}{r['threads']:>5}{'×'.join(map(str, r['qkv'])):>12}"
                  f"{'×'.join(map(str, r['kv_pool'])):>18}{r['counts']['all_reduce']:>11}"
                  f"{r['counts']['all_gather']:>11}{delta:>14.2e}  {same}")


if __name__ == "__main__":
    from minibook.models import smollm2, tiny_qwen3

    show_shapes()
    compare("tiny Qwen3", str(tiny_qwen3()), [2, 4])
    compare("SmolLM2-135M", str(smollm2()), [3])
