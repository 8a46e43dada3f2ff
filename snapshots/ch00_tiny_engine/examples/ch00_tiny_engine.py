"""第 0 章 · 最小引擎：一个文件、只用 torch，把 Llama / Qwen3 跑起来。

这个文件故意不依赖 minisgl，也不依赖 transformers 的模型代码：
读 config.json → 逐个张量读 *.safetensors → 手写解码器前向 → 贪心生成。
引擎部分只用三个库：torch（算）、safetensors（读权重）、tokenizers（分词）。
之后二十章做的事，都是把这里的每一块换成“能服务很多请求、跑得更快”的版本。

运行：
    python examples/ch00_tiny_engine.py                  # SmolLM2 与 tiny Qwen3，并与 Hugging Face 对照
    python examples/ch00_tiny_engine.py --model DIR      # 任意 Llama / Qwen3 的 HF 目录（如 Qwen3-0.6B）
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from tokenizers import Tokenizer

# ---------------------------------------------------------------------------
# 1. 配置：config.json 里我们真正用到的字段
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """前向计算需要的全部形状与超参数。字段名尽量沿用 Hugging Face 的叫法。"""

    model_type: str  # "llama" 或 "qwen3"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int  # query 头数
    num_kv_heads: int  # key/value 头数；少于 num_heads 就是 GQA
    head_dim: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool  # True：LM head 直接复用词嵌入矩阵

    @property
    def qk_norm(self) -> bool:
        """Qwen3 与 Llama 在前向上唯一的差别：每个头的 q、k 先做一次 RMSNorm，再加 RoPE。"""
        return self.model_type == "qwen3"


def load_config(model_dir: Path) -> Config:
    """读 config.json，只取我们支持的部分；遇到不支持的特性直接报错，而不是悄悄算错。"""
    raw = json.loads((Path(model_dir) / "config.json").read_text())
    model_type = raw.get("model_type")
    if model_type not in ("llama", "qwen3"):
        raise NotImplementedError(f"最小引擎只支持 llama / qwen3，这个模型是 {model_type!r}")
    if raw.get("attention_bias") or raw.get("mlp_bias"):
        raise NotImplementedError("最小引擎不支持带 bias 的线性层")
    if raw.get("hidden_act", "silu") != "silu":
        raise NotImplementedError(f"最小引擎的 MLP 只用 SiLU，这个模型是 {raw['hidden_act']!r}")
    # transformers 4.x 把 rope_theta 写在顶层；5.x 保存时挪进了 rope_parameters，两种都认。
    # 两处都可能写着缩放方式（rope_scaling 是 4.x 的写法），两处都要查：认不出的宁可报错，不能忽略
    for rope in (raw.get("rope_parameters") or {}, raw.get("rope_scaling") or {}):
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise NotImplementedError(f"最小引擎只实现了普通 RoPE，不支持 {rope}")
    rope_theta = raw.get("rope_theta", (raw.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    num_heads = raw["num_attention_heads"]
    return Config(
        model_type=model_type,
        vocab_size=raw["vocab_size"],
        hidden_size=raw["hidden_size"],
        intermediate_size=raw["intermediate_size"],
        num_layers=raw["num_hidden_layers"],
        num_heads=num_heads,
        num_kv_heads=raw.get("num_key_value_heads", num_heads),
        # Qwen3 的 head_dim（128）不等于 hidden/heads（1024/16=64），所以有就必须用配置里的。
        head_dim=raw.get("head_dim") or raw["hidden_size"] // num_heads,
        rope_theta=float(rope_theta),
        rms_norm_eps=raw["rms_norm_eps"],
        tie_word_embeddings=raw.get("tie_word_embeddings", False),
    )


# ---------------------------------------------------------------------------
# 2. 权重：逐个张量从 safetensors 读出来
# ---------------------------------------------------------------------------


def load_weights(model_dir: Path, cfg: Config) -> dict[str, torch.Tensor]:
    """返回 {HF 权重名: float32 张量}。名字原样保留，读代码时能和 checkpoint 一一对上。

    safe_open 按需读取单个张量（底层是 mmap），不会先把整个文件反序列化一遍；
    大模型被切成多个分片（model-00001-of-00002.safetensors …）时，逐个文件读即可。
    """
    weights: dict[str, torch.Tensor] = {}
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir} 下没有 *.safetensors")
    for file in files:
        with safe_open(file, framework="pt") as f:
            for name in f.keys():  # noqa: SIM118  （safe_open 的句柄只提供 keys()）
                # 统一转成 float32：CPU 上最稳，也是和 Hugging Face 逐 token 对照的前提。
                weights[name] = f.get_tensor(name).to(torch.float32)
    # tied：checkpoint 里通常根本没有 lm_head.weight，输出层就是词嵌入矩阵本身。
    if cfg.tie_word_embeddings:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    elif "lm_head.weight" not in weights:
        raise KeyError(f"{model_dir} 缺少 lm_head.weight，而 config 说输出层不与词嵌入共享")
    return weights


# ---------------------------------------------------------------------------
# 3. 分词：tokenizer.json + 聊天模板
# ---------------------------------------------------------------------------


def load_tokenizer(model_dir: Path) -> Tokenizer:
    """用 tokenizers 库直接读 tokenizer.json。

    Hugging Face 的 AutoTokenizer 底层就是它；直接用它，引擎部分就不用引入 transformers，
    读者能看清：分词只是“文本 ↔ 整数”的查表与合并，和模型计算完全分开。
    """
    return Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))


def chat_prompt(model_dir: Path, user_message: str) -> str:
    """把一句用户提问套进模型自带的聊天模板，得到要喂给模型的纯文本。

    聊天模板就是随模型发布的一段 Jinja 模板（chat_template.jinja，或 tokenizer_config.json
    里的 chat_template 字段）；渲染方式与 transformers 相同：trim_blocks + lstrip_blocks。
    """
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # torch 本身就依赖 jinja2

    model_dir = Path(model_dir)
    config_file = model_dir / "tokenizer_config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    template_file = model_dir / "chat_template.jinja"
    template = template_file.read_text() if template_file.exists() else config["chat_template"]
    # 有的模板（如 Llama 3）要用 bos_token，或调用 raise_exception：和 transformers 一样提供给它
    special = {k: v["content"] if isinstance(v, dict) else v
               for k in ("bos_token", "eos_token") if (v := config.get(k))}

    def raise_exception(message: str):
        raise ValueError(f"聊天模板报错：{message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    messages = [{"role": "user", "content": user_message}]
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, **special)


def encode_prompt(tokenizer: Tokenizer, model_dir: Path, text: str, chat: bool) -> tuple[str, list[int]]:
    """把 prompt 变成 token id；返回 (真正喂给模型的文本, id 列表)。

    普通文本按 tokenizer.json 的规则自动加特殊 token（SmolLM2、Qwen3 都不加 BOS）；
    套了聊天模板的文本里已经写好了 <|im_start|> 这类特殊 token，不能再自动加一遍。
    """
    if chat:
        text = chat_prompt(model_dir, text)
        return text, tokenizer.encode(text, add_special_tokens=False).ids
    return text, tokenizer.encode(text).ids


# ---------------------------------------------------------------------------
# 4. 算子：RMSNorm、RoPE
# ---------------------------------------------------------------------------


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm：除以最后一维的均方根，再逐通道乘可学习的 weight（没有减均值、没有 bias）。"""
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """为每个位置算旋转角的 cos / sin，形状 [seq, head_dim]。

    第 i 对维度的角速度是 theta^(-2i/head_dim)：前面的维度转得快（看近处），
    后面的维度转得慢（看远处）。rope_theta 越大，最慢的那几对转得越慢，能区分的距离越长。
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # [seq, head_dim/2]
    angles = torch.cat([angles, angles], dim=-1)  # 前后两半共用同一组角度（HF 的排布）
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """把 x 的每个头按位置旋转。x: [heads, seq, head_dim]；cos/sin: [seq, head_dim]。

    把第 j 维和第 j + head_dim/2 维看成一个二维向量 (a, b)，旋转后是
    (a·cos − b·sin, b·cos + a·sin)。旋转之后 q·k 只取决于两者的位置差。
    """
    first, second = x.chunk(2, dim=-1)
    rotated = torch.cat([-second, first], dim=-1)
    return x * cos + rotated * sin


# ---------------------------------------------------------------------------
# 5. KV cache：最简单的连续版本
# ---------------------------------------------------------------------------


class KVCache:
    """每层一块预先分配好的连续缓冲区，按位置把新 token 的 K/V 写进去。

    只服务一条序列。第 4 章会把它换成“很多请求共享的 KV 池 + 页表”。
    """

    def __init__(self, cfg: Config, max_len: int):
        shape = (cfg.num_layers, cfg.num_kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape)
        self.v = torch.zeros(shape)
        self.length = 0  # 已经写入（并且算完整个前向）的 token 数

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """把这一步的 k、v（[kv_heads, n, head_dim]）写到 length 之后，返回到目前为止的全部 K、V。"""
        end = self.length + k.shape[1]
        self.k[layer, :, self.length : end] = k
        self.v[layer, :, self.length : end] = v
        return self.k[layer, :, :end], self.v[layer, :, :end]


# ---------------------------------------------------------------------------
# 6. 一层解码器：注意力 + MLP
# ---------------------------------------------------------------------------


def attention(
    x: torch.Tensor,
    w: dict[str, torch.Tensor],
    cfg: Config,
    layer: int,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cache: KVCache,
) -> torch.Tensor:
    """自注意力（GQA）。x: [n, hidden]，n 是这一步新来的 token 数（prefill 时是整个 prompt，decode 时是 1）。"""
    n = x.shape[0]
    prefix = f"model.layers.{layer}.self_attn."
    # 投影，再拆成多头：[n, heads*head_dim] → [heads, n, head_dim]
    q = (x @ w[prefix + "q_proj.weight"].T).view(n, cfg.num_heads, cfg.head_dim).transpose(0, 1)
    k = (x @ w[prefix + "k_proj.weight"].T).view(n, cfg.num_kv_heads, cfg.head_dim).transpose(0, 1)
    v = (x @ w[prefix + "v_proj.weight"].T).view(n, cfg.num_kv_heads, cfg.head_dim).transpose(0, 1)
    if cfg.qk_norm:  # Qwen3：每个头单独归一化（weight 长度是 head_dim），让 q·k 的尺度更稳
        q = rms_norm(q, w[prefix + "q_norm.weight"], cfg.rms_norm_eps)
        k = rms_norm(k, w[prefix + "k_norm.weight"], cfg.rms_norm_eps)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)

    # 新 token 的 K/V 进缓存；取回的是“以前所有 token + 这一步”的 K/V。
    start = cache.length
    k, v = cache.store(layer, k, v)

    # GQA：每 group 个 query 头共用一个 KV 头，把 KV 头复制到和 query 头一样多。
    group = cfg.num_heads // cfg.num_kv_heads
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)

    scores = (q @ k.transpose(1, 2)) / cfg.head_dim**0.5  # [heads, n, start+n]
    # 因果掩码按“绝对位置”对齐：第 i 个新 token 的位置是 start+i，只能看位置 ≤ 它的 key。
    # 有缓存时 query 比 key 少，掩码是右下角对齐的——不能用 is_causal=True 那种左上角对齐。
    q_pos = torch.arange(start, start + n)[:, None]
    k_pos = torch.arange(start + n)[None, :]
    scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # [heads, n, head_dim]

    out = out.transpose(0, 1).reshape(n, cfg.num_heads * cfg.head_dim)
    return out @ w[prefix + "o_proj.weight"].T


def mlp(x: torch.Tensor, w: dict[str, torch.Tensor], layer: int) -> torch.Tensor:
    """SiLU 门控 MLP：down( silu(gate(x)) * up(x) )。gate 决定“放行多少”，up 提供内容。"""
    prefix = f"model.layers.{layer}.mlp."
    gate = x @ w[prefix + "gate_proj.weight"].T
    up = x @ w[prefix + "up_proj.weight"].T
    return (torch.nn.functional.silu(gate) * up) @ w[prefix + "down_proj.weight"].T


def decoder_layer(
    x: torch.Tensor,
    w: dict[str, torch.Tensor],
    cfg: Config,
    layer: int,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cache: KVCache,
) -> torch.Tensor:
    """Pre-norm 残差块：x + attn(norm(x))，再 x + mlp(norm(x))。"""
    p = f"model.layers.{layer}."
    h = rms_norm(x, w[p + "input_layernorm.weight"], cfg.rms_norm_eps)
    x = x + attention(h, w, cfg, layer, cos, sin, cache)
    h = rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg.rms_norm_eps)
    return x + mlp(h, w, layer)


# ---------------------------------------------------------------------------
# 7. 整个模型的前向，与贪心生成
# ---------------------------------------------------------------------------


def forward(token_ids: torch.Tensor, w: dict[str, torch.Tensor], cfg: Config, cache: KVCache) -> torch.Tensor:
    """喂进 n 个新 token（接在 cache 里已有的 token 后面），返回它们每个位置的 logits：[n, vocab]。"""
    n = token_ids.shape[0]
    positions = torch.arange(cache.length, cache.length + n)
    cos, sin = rope_cos_sin(positions, cfg.head_dim, cfg.rope_theta)

    x = w["model.embed_tokens.weight"][token_ids]  # 嵌入就是按 id 取行
    for layer in range(cfg.num_layers):
        x = decoder_layer(x, w, cfg, layer, cos, sin, cache)
    cache.length += n  # 所有层都写完了，这 n 个 token 才算进了缓存

    x = rms_norm(x, w["model.norm.weight"], cfg.rms_norm_eps)
    return x @ w["lm_head.weight"].T


@torch.inference_mode()
def generate(
    prompt_ids: list[int],
    w: dict[str, torch.Tensor],
    cfg: Config,
    max_new_tokens: int,
    eos_id: int | None = None,
) -> list[int]:
    """贪心生成：prefill 一次算完整个 prompt，之后每步只喂上一步选出的 1 个 token。

    返回新生成的 token id（不含 prompt）。eos_id 为 None 时不提前停，正好生成 max_new_tokens 个。
    """
    cache = KVCache(cfg, max_len=len(prompt_ids) + max_new_tokens)
    logits = forward(torch.tensor(prompt_ids), w, cfg, cache)  # prefill
    new_ids: list[int] = []
    while True:
        next_id = int(logits[-1].argmax())  # 贪心：只看最后一个位置，取概率最大的 token
        new_ids.append(next_id)
        if len(new_ids) == max_new_tokens or next_id == eos_id:
            return new_ids
        logits = forward(torch.tensor([next_id]), w, cfg, cache)  # decode：复用缓存里的 K/V


# ---------------------------------------------------------------------------
# 8. main：在书里的两个模型上跑一遍，并与 Hugging Face 逐 token 对照
# ---------------------------------------------------------------------------

# 每个 prompt：(文本, 是否套聊天模板)。第二个是给 Instruct 模型的对话式提问。
PROMPTS = [("The capital of France is", False), ("What is the capital of France?", True)]


def describe(cfg: Config) -> str:
    """一行话说清模型的形状：层数、头数、KV 头数、head_dim、hidden、词表。"""
    lm_head = "与词嵌入共享" if cfg.tie_word_embeddings else "独立"
    return (
        f"架构 {cfg.model_type} · {cfg.num_layers} 层 · {cfg.num_heads} 个注意力头 · "
        f"{cfg.num_kv_heads} 个 KV 头 · head_dim {cfg.head_dim} · hidden {cfg.hidden_size} · "
        f"词表 {cfg.vocab_size} · LM head {lm_head}"
    )


def run_model(name: str, model_dir: Path, max_new_tokens: int, compare_hf: bool, timing: bool) -> None:
    """加载一个模型目录，对每个 prompt 贪心生成；compare_hf 时与 transformers 的结果逐 token 对照并断言。"""
    cfg = load_config(model_dir)
    weights = load_weights(model_dir, cfg)
    tokenizer = load_tokenizer(model_dir)
    print(f"=== {name} ===")
    print(describe(cfg))
    for prompt, chat in PROMPTS:
        text, prompt_ids = encode_prompt(tokenizer, model_dir, prompt, chat)
        t0 = time.perf_counter()
        new_ids = generate(prompt_ids, weights, cfg, max_new_tokens)  # 不提前停在 eos，便于对照
        elapsed = time.perf_counter() - t0
        print(f"\nprompt（{len(prompt_ids)} 个 token）：{text!r}")
        print(f"生成的 token：{new_ids}")
        # 保留特殊 token：能看到模型什么时候输出了 <|im_end|>（我们不停，照样往下生成）。
        print(f"生成的文本：{tokenizer.decode(new_ids, skip_special_tokens=False)!r}")
        if compare_hf:
            from minibook.hf import hf_greedy  # 书的辅助包，只在 main 里用作参照

            hf_ids = hf_greedy(model_dir, prompt_ids, max_new_tokens)
            print(f"Hugging Face：{hf_ids}")
            print(f"与 Hugging Face 逐 token 一致：{'是' if hf_ids == new_ids else '否'}")
            assert hf_ids == new_ids, "最小引擎与 Hugging Face 的贪心输出不一致"
        if timing:
            print(f"[计时，每次运行都不同] prefill + {len(new_ids) - 1} 步 decode 共 {elapsed:.2f} s")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description="第 0 章：一个文件的最小 Llama / Qwen3 推理引擎")
    parser.add_argument("--model", type=Path, default=os.environ.get("MINISGL_MODEL") or None,
                        help="任意 Llama / Qwen3 的 Hugging Face 目录（默认取环境变量 MINISGL_MODEL）；"
                             "都没有就用书里的两个模型")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument(
        "--compare-hf",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="用 transformers 跑同样的贪心生成并逐 token 对照（默认开）",
    )
    parser.add_argument("--timing", action="store_true", help="额外打印一行计时（不确定的输出）")
    args = parser.parse_args()

    if args.model is not None:
        models = [(args.model.name, args.model)]
    else:
        from minibook.models import smollm2, tiny_qwen3  # 首次使用时自动准备模型

        models = [("SmolLM2-135M-Instruct", smollm2()), ("tiny Qwen3（随机权重）", tiny_qwen3())]
    for name, model_dir in models:
        run_model(name, model_dir, args.max_new_tokens, args.compare_hf, args.timing)


if __name__ == "__main__":
    main()
