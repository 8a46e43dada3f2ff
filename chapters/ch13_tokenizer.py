# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 第 13 章 Tokenizer 与增量反分词
#
# 调度器每步交出一个 token id，用户要的是一段段文字。可一个汉字、一个 emoji 的 UTF-8 字节常常分在几个 token 里，每来一个 token 就单独解码，屏幕上是一串“�”。本章写服务里的 tokenizer 进程：分词时套上模型的[聊天模板](../glossary.md#chat-template)，反分词时只解码一个小窗口、半个字先扣住、发出去的字永不收回，OpenAI 的 `stop` 也在这里处理。测量会数出朴素做法的“�”和[上游](../glossary.md#upstream)算法重发的字，性质测试在随机 token 序列上检查：流式输出拼起来正好等于一次性 `decode`。

# %% tags=["remove-cell"]
from minibook.page import *
setup(13)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 为什么不能每来一个 token 就 `tokenizer.decode([token])` 发出去？
# 2. 解码窗口为什么要从 `surr_offset` 而不是 `read_offset` 开始？
# 3. 停止串是 `"\n\n"`，这一步生成了一个 `"\n"`：发不发？什么时候发？
# 4. 请求在 emoji 的第 2 个字节处到了 `max_tokens`，最后一段输出是什么？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 一个字的字节分在几个 token 里时，单独解码每个 token 得到的是替换符“�”，而且拼起来也不等于整段解码。
#     2. SentencePiece 一类的分词器（Llama 2、Mistral）单独解码一段 token 时会去掉开头的空格，在上下文里才保留；窗口开头留一段已经提交的 token 当上下文，再减去它的解码，新增的部分才对。本书的 SmolLM2、Qwen3 没有这个问题，练习 041 模拟了它。
#     3. 先不发：它可能是停止串的开头。下一步如果又是 `"\n"`，停止串命中，两个换行都不发、请求结束；如果不是，就和后面的字一起发出去。
#     4. 一个“�”：这两个字节以后也补不齐了，结束时照 `decode` 的结果交出去，全部输出拼起来正好等于 `decode(全部 token)`。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章只新建文件：`minisgl/tokenizer/` 下的分词（`tokenize.py`）、反分词（`detokenize.py`）和进程入口（`server.py`）。`examples/` 下除了 main，还有演示共用的小工具 `ch13_streams.py` 和照上游逻辑重写的反分词 `ch13_upstream.py`（只为演示它的 bug）。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch13_tokenizer.py`，只用 SmolLM2 的分词器、不加载模型：聊天模板与 HF 一致；中文和 emoji 逐 token 流式，朴素解码与增量反分词各出几个“�”；上游算法重发的字；停止串；三种语言每个 token 出几个字符。`python tools/steps.py check 13` 会跑它和本章的测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 13 -- python examples/ch13_tokenizer.py
# ```
#
# ## 先量：逐 token 解码，满屏“�”
#
# SmolLM2 用[字节级 BPE](../glossary.md#byte-level-bpe)：先把文字变成 UTF-8 字节，再把常见的字节串合成 token。它的词表以英文为主，连常见的汉字也常拆成 2–3 个 token。最朴素的流式做法是每来一个 token 就单独解码它：

# %% tags=["milestone"]
import sys

sys.path.insert(0, "examples")
from ch13_streams import incremental_pieces, naive_pieces, random_steps, random_stream, show, token_bytes
from ch13_upstream import UpstreamDecoder, is_cjk

from minibook.models import smollm2
from minisgl.utils.hf import load_tokenizer

tok = load_tokenizer(smollm2())
text = "你好，世界！😀🎉 こんにちは"
ids = tok.encode(text)
naive = naive_pieces(tok, ids)
print(f"{len(text)} 个字符，{len(ids)} 个 token")
print("朴素：", show(naive))
print(f"“�”有 {''.join(naive).count(chr(0xFFFD))} 个；拼起来等于原文：{''.join(naive) == text}")
assert "\ufffd" in "".join(naive)

# %% [markdown]
# 27 个 token 里只有“，”和“に”各自是完整的字，其余都是一个字的一部分，解出来是[替换符](../glossary.md#replacement-char)。这些“�”发出去就收不回来了：客户端看到的是乱码，不是晚一点出现的字。
#
# ## 分词：套上聊天模板
#
# 先看进来的方向。API server 交来的要么是一段文本（补全接口），要么是一组对话消息（聊天接口）。对话要按模型训练时的格式拼起来，最后加上“轮到助手”的几个 token：

# %% tags=["remove-input"]
listing("minisgl/tokenizer/tokenize.py", "TokenizeManager.encode")

# %%
from minisgl.core import SamplingParams
from minisgl.message import TokenizeMsg
from minisgl.tokenizer import TokenizeManager

chat = [{"role": "user", "content": "法国的首都是哪里？"}]
(input_ids,) = TokenizeManager(tok).tokenize([TokenizeMsg(0, chat, SamplingParams())])
print(tok.decode(input_ids.tolist()))
hf = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True,
                             return_dict=True)["input_ids"]
print("与 HF apply_chat_template(tokenize=True) 相同：", input_ids.tolist() == list(hf))
assert input_ids.tolist() == list(hf)

# %% [markdown]
# SmolLM2 的模板自己补上了系统提示；末尾的 `<|im_start|>assistant\n` 就是 `add_generation_prompt=True` 加的。第 0、7 章拿 HF 对答案时用的正是这一串 id，所以服务的贪心回答也能逐 token 对上。
#
# ??? note "深入：为什么直接 `tokenize=True`，而不是先拼成字符串再 encode"
#     上游先让模板输出字符串（`tokenize=False`），再 `encode` 一遍。模板里已经有特殊 token，`encode` 对会加 BOS 的分词器（Llama 3 一类）就再加一个。SmolLM2 默认不加 BOS，看不出来；下一格让它像 Llama 3 那样加 BOS（`add_bos_token=True`），两种做法各取开头 3 个 token。

# %%
from transformers import AutoTokenizer

bos_tok = AutoTokenizer.from_pretrained(smollm2(), add_bos_token=True)
as_string = bos_tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
upstream_way = bos_tok.encode(as_string)
our_way = bos_tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True,
                                      return_dict=True)["input_ids"]
print("先拼字符串再 encode：", bos_tok.convert_ids_to_tokens(upstream_way[:3]))
print("tokenize=True：      ", bos_tok.convert_ids_to_tokens(our_way[:3]))
assert upstream_way[:2] == [bos_tok.bos_token_id] * 2 and our_way[1] != bos_tok.bos_token_id

# %% [markdown]
# 开头两个 `<|im_start|>`：模型从没见过这种输入，回答会悄悄变差，而且不报错。
#
# ## 反分词：只解码一个窗口，半个字先扣住
#
# 每次把全部 token 重新解码一遍，结果一定对，但一个请求的总代价随长度平方增长。[增量反分词](../glossary.md#incremental-detokenization)只解码最后一小段，靠两个 token 偏移记账：`surr_offset`（窗口从哪个 token 开始）和 `read_offset`（前多少个 token 的文字已经提交）。

# %% tags=["remove-input"]
listing("minisgl/tokenizer/detokenize.py", "IncrementalDecoder.push")

# %% tags=["remove-input"]
listing("minisgl/tokenizer/detokenize.py", "IncrementalDecoder._window_text")

# %% [markdown]
# 窗口从 `surr_offset`（surr 是 surrounding：窗口开头留作上下文的那几个 token）开始，而不是从 `read_offset`。这是为 SentencePiece 一类的分词器（Llama 2、Mistral）准备的：它们单独解码一段 token 会去掉开头的空格，放在上下文里才保留；两次解码带着同样的上下文，相减之后新增的部分才对。SmolLM2 和 Qwen3 的字节级 BPE 逐段拼接，上下文不起作用，也不碍事；练习 041 的小分词器模拟了这种去空格的分词器。
#
# 新增的文字完整了就提交、窗口右移；以“�”结尾就不提交，但“�”前面的字已经不会再变，记进 `pending` 先发。逐 token 看一串中英混合的 token（字节按十六进制打印）：

# %%
from minisgl.tokenizer import IncrementalDecoder

decoder = IncrementalDecoder(tok)
ids = tok.encode("A 世界a好")
print("第几个  字节     发出    surr read  已提交")
for k, token in enumerate(ids, start=1):
    piece = decoder.push([token])
    print(f"{k:>4}    {token_bytes(tok, token).hex(' ').upper():<7} {piece!r:>5}    {decoder.surr_offset:>3} "
          f"{decoder.read_offset:>4}  {decoder.committed!r}")
assert decoder.flush() == "" and decoder.committed == "A 世界a好"

# %% [markdown]
# 第 3 个 token 是“世”的前两个字节，什么也不发；第 4 个补齐了“世”，提交，`surr` 挪到 2、`read` 挪到 4。窗口始终只有几个 token。
#
# ![上：“A 世界a好”的 10 个 token 和它们的字节；中：第 3、4、6、7 个 token 到来时的解码窗口，灰色是已提交的上下文 ids[surr:read]，黄色是新的 token；新增文字以半个字结尾就不提交、不发，完整了才提交并把 surr、read 往右挪；下：一步带来几个 token 时，上游的 sent 从 3 退回 2、“世”又发一遍，本书只增不减](../assets/ch13_offsets.svg)
#
# 回到开头那段中文和 emoji，同样逐 token 流式：

# %% tags=["milestone"]
ids = tok.encode(text)
*ours, tail = incremental_pieces(tok, ids)
print("增量：", show(ours))
print(f"“�”有 {''.join(ours).count(chr(0xFFFD))} 个；拼起来等于原文：{''.join(ours) == text}")
assert "".join(ours) == text and tail == ""

# %% [markdown]
# 步与步之间用 | 隔开，发不出东西的步记作 ∅：这一步只来了半个字，客户端晚一两个 token 拿到完整的字。
#
# ### 上游的 bug：已发出的字又发一遍
#
# 上游在窗口以“�”结尾时，照 transformers 的 `TextStreamer` 的规矩先发“可打印”的一段：以汉字结尾就全发，倒数第二个是汉字就发到它，否则只发到最后一个空格。问题在于这个规矩不单调：这一步发到了“世”，下一步窗口变成“世界a�”，规矩只允许发到空格，上游把 `sent_offset` 直接设成这个更小的值；等窗口完整了，它从退回的位置重发。我们照上游的逻辑重写了一个小版本：

# %% tags=["remove-input"]
listing("examples/ch13_upstream.py", "UpstreamDecoder.push")

# %% tags=["milestone"]
ids = tok.encode("A 世界a好")
steps = [ids[0:1], ids[1:2], ids[2:5], ids[5:9], ids[9:]]  # 一步带来几个 token
for name, dec in (("上游", UpstreamDecoder(tok)), ("本书", IncrementalDecoder(tok))):
    pieces = [dec.push(s) for s in steps]
    print(f"{name}：{show(pieces)}  →  {''.join(pieces)!r}")

# %% [markdown]
# 一步带来几个 token 时会这样：sglang 的反分词一步常拿到几个 token，sglang #31598 报的就是这个。上游 mini-sglang 每条消息只有一个 token，要触发它，得有一个 token 同时补齐一个汉字、又开始下一个字。SmolLM2 的词表里有没有这种 token？数一下：

# %%
from ch13_streams import token_bytes

spanning = []
for token_id in range(len(tok)):
    raw = token_bytes(tok, token_id)
    if raw is not None:
        decoded = raw.decode("utf-8", "replace")
        if decoded.endswith("\ufffd") and any(is_cjk(ch) for ch in decoded):
            spanning.append(token_id)
print(f"SmolLM2 的 {len(tok)} 个 token 里，含完整汉字又以半个字结尾的：{len(spanning)} 个")

# %% [markdown]
# 一个也没有，所以上游配 SmolLM2、一步一个 token 时碰不上它；换一个合并得更激进的词表，或者一步多个 token，就会碰上。在随机的 token 流上量一下（随机文字里混着汉字、假名、emoji，一部分按字节拆成 token）：

# %%
import random


def count_wrong(steps_at_most: int, trials: int = 300) -> dict[str, int]:
    rng = random.Random(13)
    wrong = {"上游": 0, "本书": 0}
    for _ in range(trials):
        ids = random_stream(tok, rng)
        steps, final = random_steps(rng, ids, steps_at_most), tok.decode(ids)
        upstream = UpstreamDecoder(tok)
        sent = "".join(upstream.push(s) for s in steps)
        wrong["上游"] += not final.startswith(sent)  # 发出去的必须是最终文字的前缀
        dec = IncrementalDecoder(tok)
        ours = "".join(dec.push(s) for s in steps) + dec.flush()
        wrong["本书"] += ours != final or "\ufffd" in ours
    return wrong


one, several = count_wrong(1), count_wrong(4)
print(f"300 条随机流，每步 1 个 token，发错的条数：{one}")
print(f"300 条随机流，每步 1–4 个 token，发错的条数：{several}")
assert one == {"上游": 0, "本书": 0} and several["上游"] > 0 and several["本书"] == 0

# %% [markdown]
# 一步一个 token 时两边都不出错；一步几个 token 时，上游有一部分流发错了字，我们一条也没有。我们的 `push` 返回的永远是稳定文本新增的部分，稳定文本只会在后面追加（`push` 里的断言守着这一点），所以发出去的字不会退回。
#
# ### 结束时补不齐的半个字照 `decode` 交出
#
# 请求停在一个字的中间怎么办？让 SmolLM2 真的生成：它很爱写 🌟，一个 🌟 是 4 个字节、在这里分成 3 个 token，`max_tokens=10` 正好停在第 4 个 🌟 的第一个 token 上：

# %%
from minisgl.llm import LLM

llm = LLM(smollm2(), max_running_req=1, num_page_override=64, max_seq_len_override=128)
ask = [{"role": "user", "content": "Write one short sentence with an emoji."}]
prompt = tok.apply_chat_template(ask, add_generation_prompt=True, tokenize=True,
                                 return_dict=True)["input_ids"]
out = llm.generate([prompt], SamplingParams(max_tokens=10))[0]["token_ids"]
llm.shutdown()
naive = naive_pieces(tok, out)
*ours, tail = incremental_pieces(tok, out)
print("朴素：", show(naive))
print("增量：", show(ours), " 结束时交出：", repr(tail))
print("增量拼起来等于 decode：", "".join(ours) + tail == tok.decode(out))
assert "\ufffd" not in "".join(ours) and tail == "\ufffd"
assert "".join(ours) + tail == tok.decode(out)

# %% [markdown]
# 流式途中一个“�”也没有；结束时剩下的那个字节再也补不齐，`flush` 照 `decode` 交出一个“�”。这是有意的：它让“流式拼起来 = 一次性解码”在任何情况下都成立，客户端用流式和非流式拿到的是同一段文字。也可以选择丢掉这半个字，但那样两者就不一致了。
#
# ## 停止串：可能是开头的尾巴先扣住
#
# OpenAI 的 `stop` 让请求在某段文字出现时结束，[停止串](../glossary.md#stop-string)本身不返回。调度器只认 token，不知道文字，所以这件事在 tokenizer 进程里做。难点是停止串可能横跨几个 token：已经发出去的一半收不回来。所以稳定文本末尾“可能是某个停止串开头”的部分先扣住：

# %% tags=["remove-input"]
listing("minisgl/tokenizer/detokenize.py", "DetokenizeManager._release")

# %%
from minisgl.message import DetokenizeMsg
from minisgl.tokenizer import DetokenizeManager

samples = [("The answer is 42.\n\nNext", ["\n\n"]), ("Hello there, world", ["Hello world"])]
for sample, stop in samples:
    manager = DetokenizeManager(tok)
    manager.add_req(0, stop=stop)
    print(f"stop={stop!r}")
    for token in tok.encode(sample):
        (out,) = manager.detokenize([DetokenizeMsg(0, token, False)])
        step = f"  {tok.decode([token])!r:>10} → 发出 {out.text!r:<14}"
        if out.finished:
            print(f"{step} 结束（{out.finish_reason}），通知调度器停下：{out.abort_backend}")
            break
        print(f"{step} 扣住 {manager.states[0].held!r}")

# %% [markdown]
# 第一个 `"\n"` 被扣住，第二个到来时停止串命中：两个换行都不发，请求以 `"stop"` 结束，`abort_backend` 告诉 tokenizer 进程给调度器发 `AbortBackendMsg`，它的 KV 页马上还回去（停止串恰好由最后一个 token 补齐时不发：调度器自己已经结束了这个请求）。第二个例子里 `"Hello"` 先扣住，下一个 token 是 `" there"`，确定不是停止串，连同扣住的一起发出。
#
# EOS 也在这里处理：调度器把 EOS 当普通 token 报上来，这里不把它变成文字（`ignore_eos` 时除外），结束原因记为 `"stop"`；到了 `max_tokens` 是 `"length"`。`completion_tokens` 数调度器生成的全部 token，EOS 也算：

# %% tags=["remove-input"]
listing("minisgl/tokenizer/detokenize.py", "DetokenizeManager._one")

# %% [markdown]
# ## tokenizer 进程：收、处理、发
#
# 上游默认一个进程既分词又反分词。处理一批消息的逻辑不碰套接字，单独是一个类，按到达的顺序逐条处理：

# %% tags=["remove-input"]
listing("minisgl/tokenizer/server.py", "TokenizerHandler.handle")

# %% tags=["remove-input"]
listing("minisgl/tokenizer/server.py", "tokenize_worker")

# %% [markdown]
# 出错只影响那一个请求：对话格式不对、停止串是空串，回一个 `finish_reason="error"` 的 `UserReply`，不把请求交给调度器；调度器拒绝的请求（`RejectMsg`，比如提示太长）也这样转告。SIGTERM 换成 `KeyboardInterrupt`，进程关好套接字退出。不用套接字也能直接看它产出什么：

# %%
from minisgl.tokenizer import TokenizerHandler

handler = TokenizerHandler(tok)
to_backend, to_frontend = handler.handle([TokenizeMsg(1, "Count:", SamplingParams(), stop=[" 3"])])
print("给调度器：", [(type(m).__name__, m.uid, len(m.input_ids)) for m in to_backend])
steps = [DetokenizeMsg(1, t, False) for t in tok.encode(" 1 2 3 4")]
to_backend, to_frontend = handler.handle(steps)
print("给调度器：", to_backend)
for r in to_frontend:
    print(f"给 API server：{r.incremental_output!r:<6} finished={r.finished} {r.finish_reason} "
          f"用量 {r.prompt_tokens}+{r.completion_tokens}")

# %% [markdown]
# 只有带新文字的回复才发给 API server；停止串命中的那一步发出最后一段和结束原因，同时让调度器取消这个请求。
#
# ## 中文、日文一个 token 出不到一个字符
#
# 同一段意思，英文、中文、日文各写一遍，逐 token 增量反分词，数每一步发出几个字符：

# %%
from collections import Counter

from ch13_tokenizer import PASSAGES

plt = pyplot()
width = 0.27
for i, (lang, passage) in enumerate(PASSAGES.items()):
    pieces = incremental_pieces(tok, tok.encode(passage))[:-1]
    counts = Counter(min(len(p), 6) for p in pieces)
    xs = list(range(7))
    plt.bar([x + (i - 1) * width for x in xs], [counts[x] / len(pieces) for x in xs], width=width,
            label=f"{lang}（{len(passage) / len(pieces):.2f} 字符/token）")
plt.xticks(range(7), ["0", "1", "2", "3", "4", "5", "≥6"])
plt.xlabel("这一步发出的字符数")
plt.ylabel("占全部步数的比例")
plt.title("SmolLM2 的分词器：逐 token 流式时每一步发出几个字符")
plt.legend()
plt.show()

# %% [markdown]
# SmolLM2 的词表以英文为主：一个英文 token 平均近 5 个字符，一步也不落空；中文、日文的一个字常要 2–3 个 token，四成多的步什么也发不出。同样的字数，中文回答要多花几倍的 decode 步，流式看起来也更“一顿一顿”。

# %% [markdown]
# ## 运行
#
# 本章的 main，先看源码，再看它在本章的树里真实跑出来的输出：

# %% tags=["remove-input"]
listing("examples/ch13_tokenizer.py")

# %%
run("python examples/ch13_tokenizer.py")

# %% [markdown]
# 值得注意的地方：
#
# - 朴素解码 27 个 token 出了 25 个“�”，拼起来也不等于原文；增量反分词一个“�”也没有，拼起来正好是原文。
# - 一步带来 3、4 个 token 时，上游发出 `'A 世世界a好'`，我们发出 `'A 世界a好'`。
# - `"你好世界和平"` 按字节拆成 18 个 token，停止串“世界”在第 12 个 token（“界”的最后一个字节）命中，只发出“你好”。
# - 英文每个 token 4.90 个字符，中文 0.57、日文 0.56；中文有 43% 的步什么也不发。

# %% [markdown]
# ## 与上游的差异
#
# - 我们的稳定文本只追加、已发出的字符数（`sent_offset`）只增不减，窗口里稳定的字先发；上游按“可打印”规矩回退 `sent_offset`，一步多个 token 时重发已发的字（sglang #31598）。`python/minisgl/tokenizer/detokenize.py` · `DetokenizeManager.detokenize`
# - 我们实现了 `stop`：跨 token 匹配、扣住疑似开头、命中后让调度器取消；上游的 `TokenizeMsg` 没有这个字段。`python/minisgl/message/tokenizer.py` · `TokenizeMsg`
# - 我们的对话直接 `apply_chat_template(tokenize=True)`；上游先拼字符串再 `encode`，会加 BOS 的分词器上得到两个 BOS。`python/minisgl/tokenizer/tokenize.py` · `TokenizeManager.tokenize`
# - 我们的回复带结束原因、用量和错误原因，坏输入只让那个请求失败；上游的 `UserReply` 只有 `finished`，分词出错时进程退出。`python/minisgl/tokenizer/server.py` · `tokenize_worker`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 分词和对话模板：`python/minisgl/tokenizer/tokenize.py` · `TokenizeManager.tokenize`（第 14～31 行）
# - 增量反分词，每个请求一份状态：`python/minisgl/tokenizer/detokenize.py` · `DetokenizeManager.detokenize`（第 70～111 行）、`python/minisgl/tokenizer/detokenize.py` · `DecodeStatus`（第 54～60 行）
# - 哪些文字可以先发：`python/minisgl/tokenizer/detokenize.py` · `find_printable_text`（第 35～51 行）
# - tokenizer 进程的循环：`python/minisgl/tokenizer/server.py` · `tokenize_worker`（第 30～110 行）
# - 进出的消息：`python/minisgl/message/tokenizer.py` · `TokenizeMsg`（第 34～38 行）、`python/minisgl/message/tokenizer.py` · `DetokenizeMsg`（第 27～31 行）、`python/minisgl/message/tokenizer.py` · `AbortMsg`（第 41～43 行）、`python/minisgl/message/frontend.py` · `UserReply`（第 25～29 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch13_tokenizer.py`：性质测试（hypothesis）在 SmolLM2 真实的分词器上随机生成 token 流（正常分词和按字节拆开混在一起，夹着特殊 token，随机分步），检查拼起来等于 `decode`、结束前没有“�”；任意字节（多半不是合法 UTF-8）也拼得对；停止串与一个“每来一个 token 就从头找一遍”的朴素参照比较；EOS、结束原因、用量；聊天模板与 HF 逐个 id 相同。最后起一个真的 tokenizer 进程（spawn），测试扮演 API server 和调度器，走真的 ipc 套接字：分词、流式回复、停止串让调度器取消、取消和拒绝、坏字节不让进程崩、SIGTERM 干净退出。核心的性质测试：

# %% tags=["remove-input"]
listing("tests/test_ch13_tokenizer.py", "test_streamed_pieces_equal_decode_and_never_show_a_half_character")

# %%
run("python -m pytest -q --color=no tests/test_ch13_tokenizer.py -k 'streamed or upstream'")

# %% [markdown]
# ## 怎么讲清楚
#
# 字节级 BPE 会把一个字拆进几个 token，逐 token 解码就是满屏“�”。增量反分词只解码一个小窗口：窗口开头留几个已提交的 token 当上下文，减去它们的解码就是新增的文字；以半个字结尾就先不提交，“�”前面已经稳定的字照发；已发出的字符数只增不减，所以绝不重发，上游在一步多个 token 时就会重发。结束时补不齐的半个字照 `decode` 交出，流式和非流式一致。停止串同理：可能是开头的尾巴先扣住。SmolLM2 上中文一个 token 平均只出 0.57 个字符，四成多的步什么也发不出。

# %% [markdown]
# ## 练习
#
# 1. **窗口的大小**。正常文本里，`ids[surr_offset:]` 最多有几个 token？什么样的输出会让它一直变长？
# 2. **停止串和半个字**。停止串是 `"世界"`，某一步稳定文本是 `"你好世"`、窗口末尾还有“界”的前两个字节。`_release` 扣住了什么？为什么不会把“世”发出去？
# 3. **挑战：多个停止串**。停止串 `["abcd", "bc"]`，文字流式地出现 `"abcd"`。我们在哪一步结束、返回什么？如果改成“等到不可能再有更长的匹配再决定”，会有什么不同，vLLM、sglang 是哪一种？
#
# ??? success "参考答案"
#
#     1. 上下文是上一次提交的那几个 token，加上从那以后还没凑成完整字的 token：一个字最多 4 个字节，通常不超过 6–8 个。如果模型一直输出不合法的字节（每一步都以“�”结尾），窗口就一直变长，每步解码的代价随之变大（sglang #34740 就是这种情况）。
#     2. 稳定文本是 `"你好世"`（末尾的半个字不算），`"世"` 是停止串 `"世界"` 的开头，`_held_back` 扣住它，只发出 `"你好"`；等“界”补齐，停止串命中，扣住的“世”连同“界”都不发。
#     3. 出现 `"abc"` 时 `"bc"` 已经完整出现，我们就在这一步结束，返回 `"a"`。等更长匹配的做法会等到 `"abcd"`、返回空串，但要多生成 token、多扣文字。vLLM（`vllm/v1/engine/detokenizer.py` 的 `check_stop_strings`）和 sglang（`schedule_batch.py` 的 `Req.check_finished`）都是每步解出新文字就查一遍、哪个停止串出现了就停，和我们一样。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 39   # 把第 39 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 39    # 判题
# python practice/judge.py hint 39    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - tokenizer 进程一个进程既分词又反分词；处理逻辑（`TokenizerHandler`）不碰套接字，按到达的顺序逐条处理。
# - 分词：对话用 `apply_chat_template(add_generation_prompt=True, tokenize=True)`，与 HF 逐个 id 相同，不会多一个 BOS。
# - 反分词：窗口 `ids[surr_offset:]` 减去已提交的 `ids[surr_offset:read_offset]`（两个 token 偏移）；半个字先扣住，稳定的字先发，稳定文本只增不减；结束时补不齐的字节照 `decode` 变成一个“�”，流式拼起来总等于 `decode`。
# - 停止串：可能是开头的尾巴扣住，命中后不发停止串、以 `"stop"` 结束并让调度器取消；EOS 不进文字，`max_tokens` 对应 `"length"`。
