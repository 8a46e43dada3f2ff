"""第 7 章的 main：用离线接口 LLM.generate 生成，提示可以是文字也可以是 token id，和 HF 逐 token 对答案。"""

from __future__ import annotations

from minisgl.core import SamplingParams
from minisgl.llm import LLM


def main() -> None:
    from minibook.hf import encode, hf_greedy
    from minibook.models import default_model, tiny_qwen3

    texts = ["The capital of France is", "Once upon a time,", "def fibonacci(n):",
             "Water boils at a temperature of", "The three primary colors are"]
    max_tokens = [12, 6, 20, 3, 9]
    for path in [default_model(), tiny_qwen3()]:
        # 页表只有 3 行：5 个请求进不来一起，先到先得，有人结束了后面的才进来
        llm = LLM(path, max_running_req=3, num_page_override=96, page_size=4, max_seq_len_override=64)
        params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens]
        prompts = [encode(path, t) for t in texts[:2]] + texts[2:]  # token id 和文字混着给
        outs = llm.generate(prompts, params)
        print(f"== {path.name}")
        for text, out, n in zip(texts, outs, max_tokens):
            same = out["token_ids"] == hf_greedy(path, encode(path, text), n)
            assert same and len(out["token_ids"]) == n
            print(f"  {text!r} → {out['text']!r}  {n} 个 token，与 HF 一致：{same}")
        assert llm.page_allocator.num_free_pages == llm.engine.num_pages
        llm.shutdown()


if __name__ == "__main__":
    main()
