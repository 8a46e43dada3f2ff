"""第 7 章的 main：用离线接口 LLM.generate 生成，和 HF 逐 token 对答案。

- 提示可以是文字，也可以是 token id；采样参数可以给一个，也可以每个提示一个；
- 页表只有 3 行，5 个请求先到先得，有人结束了后面的才进来；
- 聊天提示在 EOS 处停下，输出里不含 EOS；
- 太长的提示在门口就报错，指明第几个，一个请求都不跑。

    python examples/ch07_scheduler.py                     # 默认：SmolLM2 与 tiny Qwen3
    MINISGL_MODEL=/path/to/Qwen3-0.6B python examples/ch07_scheduler.py
"""

from __future__ import annotations

from minisgl.core import SamplingParams
from minisgl.llm import LLM


TEXTS = ["The capital of France is", "Once upon a time,", "def fibonacci(n):",
         "Water boils at a temperature of", "The three primary colors are"]
MAX_TOKENS = [10, 6, 14, 3, 8]


def _short(text: str, width: int = 48) -> str:
    """显示用：连续的空白并成一个空格，太长的截断（随机权重的 tiny Qwen3 会生成成串的空格）。"""
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[:width] + "…")


def compare_with_hf(llm: LLM, path) -> None:
    """5 个请求一起交给 generate：token id 和文字混着给，每个请求一个 SamplingParams。"""
    from minibook.hf import encode, hf_greedy

    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in MAX_TOKENS]
    prompts = [encode(path, t) for t in TEXTS[:2]] + TEXTS[2:]
    outs = llm.generate(prompts, params)
    rows = llm.config.max_running_req
    print(f"== {path.name}：{len(prompts)} 个请求，页表 {rows} 行")
    for text, out, n in zip(TEXTS, outs, MAX_TOKENS):
        same = out["token_ids"] == hf_greedy(path, encode(path, text), n)
        assert same and len(out["token_ids"]) == n
        print(f"  {text!r} → {_short(out['text'])}  {n} 个 token，与 HF 一致：{same}")
    assert llm.page_allocator.num_free_pages == llm.engine.num_pages
    assert llm.table_manager.available_size == rows
    print(f"  结束后空闲页 {llm.page_allocator.num_free_pages} / {llm.engine.num_pages}，"
          f"空闲行 {llm.table_manager.available_size} / {rows}")


def stop_at_eos_and_refuse_too_long(llm: LLM, path) -> None:
    from minibook.hf import hf_greedy

    # 聊天提示：模型答完会生成 EOS（<|im_end|>），请求就此结束，EOS 不放进输出
    chat = list(llm.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, tokenize=True, return_dict=False))
    out = llm.generate([chat], SamplingParams(max_tokens=12))[0]
    ref = hf_greedy(path, chat, 12)  # HF 这边不看 EOS，一直生成到 12 个
    cut = ref.index(llm.eos_token_id) if llm.eos_token_id in ref else len(ref)
    assert out["token_ids"] == ref[:cut]
    print(f"  聊天提示 → {out['text']!r}：{len(out['token_ids'])} 个 token 就停了"
          f"（max_tokens=12），HF 输出的第 {cut + 1} 个 token 是 EOS")
    # 太长的提示：整批在门口拒绝，指明第几个；一个请求都没有排进去
    try:
        llm.generate(["Hi", list(range(100, 160))], SamplingParams(max_tokens=8))
        raise AssertionError("60 + 8 个 token 超过了 max_seq_len=64，应当报错")
    except ValueError as e:
        print(f"  太长的提示：ValueError：{e}")
    assert not llm.runnable


def main() -> None:
    from minibook.models import default_model, tiny_qwen3

    for path in [default_model(), tiny_qwen3()]:
        # 页表只有 3 行：5 个请求进不来一起，先到先得，有人结束了后面的才进来
        llm = LLM(path, max_running_req=3, num_page_override=96, page_size=4, max_seq_len_override=64)
        compare_with_hf(llm, path)
        if path == default_model():
            stop_at_eos_and_refuse_too_long(llm, path)
        llm.shutdown()


if __name__ == "__main__":
    main()
