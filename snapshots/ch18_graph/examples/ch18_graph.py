"""第 18 章：图捕获。

一、录哪些批大小：GPU 上默认的表、CPU 上默认不录、请求数上限截掉大的档位；
二、补齐：3 个请求的 decode 批补上 1 个占位请求凑到 4；占位请求坐占位行、写占位页；
    每一步的输入都拷进同一块固定缓冲区（地址不变）；
三、编译：tiny Qwen3 按 1、2、4、8 各编译一次，跑完一批长短不一的请求后编译次数不变，
    贪心结果与 HF 逐 token 相同；
四、错的版本：positions 缓冲区不刷新。SmolLM2 照样说出通顺的句子，但和 HF 的不一样。
"""

from __future__ import annotations

import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.engine.graph import GraphInputs, capture_batch_sizes
from minisgl.llm import LLM

PROMPTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,",
           "Water boils at", "My favourite colour is"]


def section_sizes() -> None:
    print("一、录哪些批大小")
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    print(f"  GPU 默认（录到 160）：{capture_batch_sizes(None, None, 256, gpu)}")
    print(f"  CPU 默认：{capture_batch_sizes(None, None, 256, cpu)}（编译要时间，默认不录）")
    print(f"  --cuda-graph-max-bs 40，请求数上限 20：{capture_batch_sizes(None, 40, 20, cpu)}")
    print(f"  直接给列表 (8, 2, 2)：{capture_batch_sizes((8, 2, 2), None, 20, cpu)}")


def section_padding() -> None:
    print("\n二、补齐：tiny Qwen3，录 1、2、4、8；3 个请求一起 decode")
    path = tiny_qwen3()
    llm = LLM(path, max_running_req=8, num_page_override=256, max_seq_len_override=64, page_size=1,
              cuda_graph_bs=(1, 2, 4, 8))
    engine, runner = llm.engine, llm.engine.graph_runner
    print(f"  占位行 = 页表第 {engine.dummy_req.table_idx} 行，占位页 = {engine.dummy_page} 号"
          f"（槽位 {engine.dummy_page * engine.config.page_size}）")
    shown, addresses = [], set()
    replay = runner.replay

    def watching_replay(batch):
        if not shown:
            shown.append(batch)
            print(f"  真实请求 {batch.size} 个，补齐到 {batch.padded_size} 个：uid = {[r.uid for r in batch.padded_reqs]}")
            print(f"  positions = {batch.positions.tolist()}（占位请求在位置 0）")
            print(f"  out_loc   = {batch.out_loc.tolist()}（占位请求写进占位页）")
        out = replay(batch)
        addresses.add((runner.inputs.input_ids.data_ptr(), runner.inputs.positions.data_ptr()))
        return out

    runner.replay = watching_replay
    llm.generate([encode(path, p) for p in PROMPTS[:3]], SamplingParams(max_tokens=4, ignore_eos=True))
    print(f"  每步的输入都拷进同一块缓冲区：用过的 (input_ids, positions) 地址对 {len(addresses)} 个")
    llm.shutdown()


def section_compile() -> None:
    print("\n三、编译：tiny Qwen3，6 个长短不一的请求，重叠开着")
    path = tiny_qwen3()
    llm = LLM(path, max_running_req=8, num_page_override=600, max_seq_len_override=96, page_size=2,
              cuda_graph_bs=(1, 2, 4, 8))
    runner = llm.engine.graph_runner
    print(f"  建引擎时编译了 {runner.compiles} 次，用了 {runner.capture_seconds:.1f} 秒")
    sizes = []
    replay = runner.replay
    runner.replay = lambda batch: (sizes.append((batch.size, batch.padded_size)), replay(batch))[1]
    max_tokens = [12, 3, 9, 5, 7, 10]
    prompts = [encode(path, p) for p in PROMPTS]
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    print(f"  走图的 decode 步（真实 → 补齐后）：{' '.join(f'{a}→{b}' for a, b in sizes)}")
    print(f"  跑完之后编译次数：{runner.compiles}")
    same = [o["token_ids"] == hf_greedy(path, p, n) for o, p, n in zip(outs, prompts, max_tokens)]
    print(f"  6 个请求与 HF 逐 token 相同：{same}")
    llm.shutdown()


def fill_without_positions(self: GraphInputs, batch) -> None:
    """错的版本：忘了拷 positions。图里读到的一直是录制时留在缓冲区里的位置。"""
    bs = batch.padded_size
    self.input_ids[:bs].copy_(batch.input_ids)
    self.out_loc[:bs].copy_(batch.out_loc)


def section_stale_positions() -> None:
    print("\n四、错的版本：positions 缓冲区不刷新（SmolLM2，录批大小 1）")
    path = smollm2()
    prompt = encode(path, "The three primary colours are")
    right = GraphInputs.fill
    for name, fill in (("正确", right), ("不刷新 positions", fill_without_positions)):
        GraphInputs.fill = fill
        llm = LLM(path, max_running_req=1, num_page_override=128, max_seq_len_override=64, cuda_graph_bs=(1,))
        out = llm.generate([prompt], SamplingParams(max_tokens=16, ignore_eos=True))[0]
        llm.shutdown()
        print(f"  {name}：{out['text']!r}")
        print(f"    与 HF 逐 token 相同：{out['token_ids'] == hf_greedy(path, prompt, 16)}")
    GraphInputs.fill = right


if __name__ == "__main__":
    section_sizes()
    section_padding()
    section_compile()
    section_stale_positions()
