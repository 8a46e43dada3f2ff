"""第 20 章：MoE。

一、路由：小 Qwen3-MoE 的第 1 层，一句提示里每个 token 选了哪两个专家、权重多少，各专家接了几个 token；
二、排块：同一份路由交给 moe_align_block_size，看每个专家的格子怎样排好、补齐成整块；
三、整个模型：loop、fused 两个后端的贪心结果都与 HF 逐 token 相同。

设置了 $MINISGL_MOE_MODEL（例如下载好的 Qwen3-30B-A3B）就用它，否则用书里的小 MoE。
"""

from __future__ import annotations

from collections import Counter

import torch

from minibook.hf import encode, hf_greedy
from minibook.models import moe_model
from minisgl.core import SamplingParams
from minisgl.layers import MoELayer
from minisgl.llm import LLM
from minisgl.moe import moe_align_block_size, select_experts
from minisgl.utils.hf import load_tokenizer

PROMPT = "The capital of France is"
BLOCK = 4  # 排块演示用的块大小（引擎里 fused 后端用 16）
NEW = 12


def first_moe_layer(llm: LLM) -> tuple[int, MoELayer]:
    config = llm.engine.model_config
    layer_id = next(i for i in range(config.num_layers) if config.is_moe_layer(i))
    return layer_id, llm.engine.model.model.layers[layer_id].mlp.experts


def section_routing(path, llm: LLM) -> torch.Tensor:
    """跑一次 prefill，截下第一个 MoE 层的路由 logits；打印每个 token 的选择。返回 topk_ids。"""
    config = llm.engine.model_config
    layer_id, layer = first_moe_layer(llm)
    dense = [i for i in range(config.num_layers) if not config.is_moe_layer(i)]
    print(f"一、路由：{path.name}，{config.num_layers} 层（稠密 MLP 的层：{dense or '无'}），"
          f"每层 {config.num_experts} 个专家，每个 token 选 {config.num_experts_per_tok} 个，"
          f"权重{'再归一化' if config.norm_topk_prob else '不归一化'}")
    captured: list[torch.Tensor] = []
    forward = layer.forward

    def capture(x, router_logits):
        captured.append(router_logits.clone())
        return forward(x, router_logits)

    layer.forward = capture
    ids = encode(path, PROMPT)
    llm.generate([ids], SamplingParams(max_tokens=1, ignore_eos=True))  # 只要 prefill 这一步
    llm.engine.synchronize()
    layer.forward = forward
    logits = captured[0]
    weights, topk = select_experts(logits, config.num_experts_per_tok, config.norm_topk_prob)
    tokenizer = load_tokenizer(path)
    print(f"  第 {layer_id} 层，提示 {PROMPT!r} 的 {len(ids)} 个 token：")
    for i, token in enumerate(ids):
        text = tokenizer.decode([token])
        chosen = "，".join(f"专家 {e}（{w:.2f}）" for e, w in zip(topk[i].tolist(), weights[i].tolist()))
        top = logits[i].sort(descending=True).values
        k = config.num_experts_per_tok
        print(f"    {text!r:>10} → {chosen}；第 {k} 名比第 {k + 1} 名的 logit 高 {top[k - 1] - top[k]:.2f}")
    load = Counter(topk.flatten().tolist())
    print(f"  各专家接到的 token 数：{[load.get(e, 0) for e in range(config.num_experts)]}"
          f"（共 {len(ids)} × {config.num_experts_per_tok} = {topk.numel()} 格）")
    print()
    return topk


def section_align(topk: torch.Tensor, num_experts: int) -> None:
    sorted_ids, expert_ids, used = moe_align_block_size(topk, BLOCK, num_experts)
    pairs = topk.numel()
    k = topk.shape[1]
    print(f"二、排块：{pairs} 个格子（格子编号 = token × {k} + 第几个选择），块大小 {BLOCK}，"
          f"缓冲区 {sorted_ids.numel()} 行（只取决于形状），用到 {used.item()} 行")
    rows = sorted_ids.view(-1, BLOCK).tolist()
    for b, (expert, row) in enumerate(zip(expert_ids.tolist(), rows)):
        if expert < 0:
            print(f"    块 {b} 起：没用到，expert_ids = -1（共 {expert_ids.numel() - b} 块）")
            break
        cells = " ".join("空" if s == pairs else f"{s}（t{s // k}）" for s in row)
        print(f"    块 {b}：专家 {expert}：{cells}")
    print()


def section_greedy(path) -> None:
    prompts = [encode(path, p) for p in (PROMPT, "Once upon a time", "def fibonacci(n):")]
    want = [hf_greedy(path, p, NEW) for p in prompts]
    tokenizer = load_tokenizer(path)
    print(f"三、整个模型：{len(prompts)} 个请求一批，各生成 {NEW} 个 token，与 HF 的 Qwen3MoeForCausalLM 比")
    for backend in ("loop", "fused"):
        llm = LLM(path, moe_backend=backend, num_page_override=256, max_seq_len_override=64)
        outs = llm.generate(prompts, SamplingParams(max_tokens=NEW, ignore_eos=True))
        llm.shutdown()
        same = [list(o["token_ids"]) == w for o, w in zip(outs, want)]
        print(f"  moe_backend={backend}：与 HF 逐 token 相同 {sum(same)} / {len(same)}")
        assert all(same), f"{backend} 后端的贪心结果与 HF 不同"
    print(f"  第一个请求：{PROMPT!r} → {tokenizer.decode(want[0])!r}（随机权重，读不通是正常的）")


def main() -> None:
    path = moe_model()
    llm = LLM(path, num_page_override=256, max_seq_len_override=64)
    topk = section_routing(path, llm)
    section_align(topk, llm.engine.model_config.num_experts)
    llm.shutdown()
    section_greedy(path)


if __name__ == "__main__":
    main()
