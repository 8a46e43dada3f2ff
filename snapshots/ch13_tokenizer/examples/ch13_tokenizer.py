"""第 13 章的 main：分词与增量反分词，只用 SmolLM2 的分词器（不加载模型）。

1. 聊天模板：TokenizeManager 的结果与 Hugging Face 的 apply_chat_template 逐个 id 相同；
2. 逐 token 流式输出中文和 emoji：朴素地每个 token 单独 decode，数出多少个“�”；增量反分词一个也没有；
3. 上游的算法在一步带来几个 token 时把已发出的字再发一遍，我们的不会；
4. 停止串跨 token 命中，停止串本身不发，扣住的文字在确定不是停止串时放出来；
5. 英文、中文、日文每个 token 平均出几个字符，有多少步什么也发不出。
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ch13_streams import byte_tokens, incremental_pieces, naive_pieces, show  # noqa: E402
from ch13_upstream import UpstreamDecoder  # noqa: E402

from minibook.models import smollm2  # noqa: E402
from minisgl.core import SamplingParams  # noqa: E402
from minisgl.message import DetokenizeMsg, TokenizeMsg  # noqa: E402
from minisgl.tokenizer import DetokenizeManager, IncrementalDecoder, TokenizeManager  # noqa: E402
from minisgl.utils.hf import load_tokenizer  # noqa: E402

REPLACEMENT = "\ufffd"

# 三段意思相近的文字，用来数“每个 token 出几个字符”
PASSAGES = {
    "英文": "The scheduler keeps the device busy: while one batch runs, the next one is prepared, "
            "and every finished request returns its pages to the pool.",
    "中文": "调度器让设备一直忙着：一批在算的时候，下一批已经准备好了；每个结束的请求都把它的页还给池子。",
    "日文": "スケジューラはデバイスを休ませない。一つのバッチが動いている間に次のバッチを準備し、"
            "終わったリクエストはページをプールに返す。",
}


def chat_template(tok) -> None:
    print("== 1. 聊天模板")
    chat = [{"role": "user", "content": "法国的首都是哪里？"}]
    (ids,) = TokenizeManager(tok).tokenize([TokenizeMsg(0, chat, SamplingParams())])
    hf = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    print(f"  {len(ids)} 个 token，最后 4 个解码出来是 {tok.decode(ids[-4:].tolist())!r}（请模型开始回答）")
    print(f"  与 HF apply_chat_template(tokenize=True) 相同：{ids.tolist() == list(hf)}")


def naive_vs_incremental(tok) -> None:
    print("== 2. 逐 token 流式：朴素 decode 对比增量反分词（| 隔开每一步，∅ 是什么也没发的一步）")
    text = "你好，世界！😀🎉 こんにちは"
    ids = tok.encode(text)
    naive, (*ours, tail) = naive_pieces(tok, ids), incremental_pieces(tok, ids)
    assert tail == ""  # 文字完整：结束时没有扣着的半个字
    print(f"  {text!r}：{len(text)} 个字符，{len(ids)} 个 token")
    print(f"  朴素：{show(naive)}")
    print(f"  增量：{show(ours)}")
    print(f"  朴素的“�”：{''.join(naive).count(REPLACEMENT)} 个，拼起来等于 decode：{''.join(naive) == text}")
    print(f"  增量的“�”：{''.join(ours).count(REPLACEMENT)} 个，拼起来等于 decode：{''.join(ours) == text}")


def upstream_bug(tok) -> None:
    print("== 3. 一步带来几个 token 时，上游把已发出的字再发一遍")
    ids = tok.encode("A 世界a好")
    steps = [ids[0:1], ids[1:2], ids[2:5], ids[5:9], ids[9:]]
    print(f"  每步的 token 数：{[len(s) for s in steps]}")
    for name, decoder in (("上游", UpstreamDecoder(tok)), ("本书", IncrementalDecoder(tok))):
        pieces = [decoder.push(s) for s in steps]
        print(f"  {name}：{show(pieces)}  →  拼起来 {''.join(pieces)!r}")


def stop_strings(tok) -> None:
    print("== 4. 停止串")
    cases = [("The answer is 42.\n\nNext question", ["\n\n"], tok.encode),
             ("你好世界和平", ["世界"], lambda s: byte_tokens(tok, s.encode())),
             ("Hello there, world", ["Hello world"], tok.encode)]
    for text, stop, encode in cases:
        manager = DetokenizeManager(tok)
        manager.add_req(0, stop=stop)
        ids = encode(text)
        outs = manager.detokenize([DetokenizeMsg(0, t, False) for t in ids])
        last = outs[-1]
        print(f"  stop={stop!r}，{len(ids)} 个 token：{show([o.text for o in outs])}")
        print(f"    处理了 {len(outs)} 个 token，结束：{last.finished}（{last.finish_reason}），"
              f"要让调度器停下：{last.abort_backend}")


def chars_per_token(tok) -> None:
    print("== 5. 每个 token 出几个字符（逐 token 增量反分词）")
    for lang, text in PASSAGES.items():
        ids = tok.encode(text)
        pieces = incremental_pieces(tok, ids)[:-1]  # 最后一项是 flush，文字完整时为空
        empty = sum(p == "" for p in pieces)
        assert "".join(pieces) == text and not any(REPLACEMENT in p for p in pieces)
        print(f"  {lang}：{len(text)} 个字符，{len(ids)} 个 token，平均每个 token {len(text) / len(ids):.2f} 个字符；"
              f"{empty} 步（{empty / len(ids):.0%}）什么也没发")


def main() -> None:
    tok = load_tokenizer(smollm2())
    chat_template(tok)
    naive_vs_incremental(tok)
    upstream_bug(tok)
    stop_strings(tok)
    chars_per_token(tok)


if __name__ == "__main__":
    main()
