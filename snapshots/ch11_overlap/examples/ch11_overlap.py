"""第 11 章的 main：同一批请求，重叠调度开和关各跑一遍，输出都与 HF 逐 token 一致。

重叠时一个请求的结果晚一步才知道：停在 EOS 的请求已经被排进了下一批，那一步多算的 token
要丢掉。main 数出每种模式"算了多少个 token、输出了多少个"。

    python examples/ch11_overlap.py                     # 默认：SmolLM2
    MINISGL_MODEL=/path/to/Qwen3-0.6B python examples/ch11_overlap.py
"""

from __future__ import annotations

import os

from minisgl.core import SamplingParams
from minisgl.llm import LLM

# 第一个提示是对话格式：SmolLM2 答完 "Paris." 就输出 EOS（<|im_end|>），请求在 EOS 处结束
CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
TEXTS = [CHAT, "Once upon a time,", "def fibonacci(n):", "Water boils at a temperature of",
         "The three primary colors are"]
MAX_TOKENS = [16, 6, 20, 3, 9]


def run(path, overlap: bool) -> tuple[list[dict], int, int]:
    """跑一遍，返回输出、步数，以及一共算了多少个 token（每批每个请求算一个）。"""
    if overlap:
        os.environ.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING", None)
    else:
        os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"
    # 页表只有 3 行：5 个请求陆续进来、陆续结束
    llm = LLM(path, max_running_req=3, num_page_override=96, page_size=4, max_seq_len_override=96)
    assert llm.overlap == overlap
    computed = []
    forward = llm.engine.forward_batch

    def counting_forward(batch, args):
        computed.append(batch.size)
        return forward(batch, args)

    llm.engine.forward_batch = counting_forward
    params = [SamplingParams(max_tokens=n, ignore_eos=(i > 0)) for i, n in enumerate(MAX_TOKENS)]
    outs = llm.generate(TEXTS, params)
    llm.cache_manager.check_integrity()  # 页全部还回来了：空闲页 + 缓存持有的页 == 总页数
    assert llm.table_manager.available_size == 3 and not llm.finished_reqs
    eos = llm.eos_token_id
    llm.shutdown()
    return outs, len(computed), sum(computed), eos


def main() -> None:
    from minibook.hf import encode, hf_greedy
    from minibook.models import default_model

    for path in [default_model()]:
        print(f"== {path.name}")
        results = {}
        for overlap in (True, False):
            outs, steps, computed, eos = run(path, overlap)
            reported = sum(len(o["token_ids"]) for o in outs)
            results[overlap] = outs
            mode = "重叠调度" if overlap else "不重叠（MINISGL_DISABLE_OVERLAP_SCHEDULING=1）"
            print(f"  {mode}：{steps} 步，算了 {computed} 个 token，输出 {reported} 个")
        print("  （EOS 本身不进输出；重叠时 EOS 之后已经发出的那一步也算了一个，丢掉）")
        for i, (text, out, n) in enumerate(zip(TEXTS, results[True], MAX_TOKENS)):
            reference = hf_greedy(path, encode(path, text), n)
            if i == 0 and eos in reference:  # 第一个请求停在 EOS：HF 的输出截到 EOS 之前
                reference = reference[: reference.index(eos)]
            same = out["token_ids"] == reference
            assert same
            shown = "（对话）What is the capital of France?" if i == 0 else text
            print(f"  {shown!r} → {out['text'][:48]!r}  {len(out['token_ids'])} 个 token，"
                  f"与 HF 一致：{same}")
        same_modes = [o["token_ids"] for o in results[True]] == [o["token_ids"] for o in results[False]]
        assert same_modes
        print(f"  两种模式的输出相同：{same_modes}")


if __name__ == "__main__":
    main()
