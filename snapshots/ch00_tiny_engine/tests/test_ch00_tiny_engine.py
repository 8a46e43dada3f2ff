"""第 0 章的测试：一个文件的最小引擎，与 Hugging Face transformers 逐 token、逐 logit 对得上。

examples/ 不是包，所以按文件路径把 main 当模块导入（它的 __main__ 部分不会执行）。
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from minibook.hf import hf_greedy, hf_logits
from minibook.models import smollm2, tiny_qwen3

EXAMPLE = Path(__file__).parent.parent / "examples" / "ch00_tiny_engine.py"


def load_example():
    spec = importlib.util.spec_from_file_location("ch00_tiny_engine", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # @dataclass 要在 sys.modules 里找到定义它的模块
    spec.loader.exec_module(module)
    return module


engine = load_example()

MODELS = {"smollm2": smollm2, "tiny_qwen3": tiny_qwen3}

# 三个长度不同的 prompt：(文本, 是否套聊天模板)
PROMPTS = {
    "short": ("The capital of France is", False),
    "chat": ("What is the capital of France?", True),
    "long": (
        (
            "Large language models generate text one token at a time. During the prefill phase the "
            "whole prompt is processed at once; afterwards, each decoding step feeds a single new "
            "token and reuses the keys and values that were cached for the earlier positions, so"
        ),
        False,
    ),
}
MAX_NEW_TOKENS = 12
# float32 下的容差：实测差异在 1e-5 量级（SmolLM2 的 logits 绝对值到 40 左右）；
# 掩码、RoPE、GQA 写错一处，差异是 O(1) 量级，远大于它。
ATOL = 1e-3


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    """一个模型目录，连同最小引擎读出的配置、权重、分词器（每个模型只加载一次）。"""
    model_dir = MODELS[request.param]()
    cfg = engine.load_config(model_dir)
    return SimpleNamespace(
        name=request.param,
        dir=model_dir,
        cfg=cfg,
        weights=engine.load_weights(model_dir, cfg),
        tokenizer=engine.load_tokenizer(model_dir),
    )


def prompt_ids(model, key: str) -> list[int]:
    text, chat = PROMPTS[key]
    return engine.encode_prompt(model.tokenizer, model.dir, text, chat)[1]


def full_logits(model, ids: list[int]) -> torch.Tensor:
    """不靠任何历史缓存、一次算完整条序列的 logits。"""
    cache = engine.KVCache(model.cfg, max_len=len(ids))
    with torch.inference_mode():
        return engine.forward(torch.tensor(ids), model.weights, model.cfg, cache)


# --- (1) 贪心生成与 Hugging Face 逐 token 一致 ------------------------------------


@pytest.mark.parametrize("key", list(PROMPTS))
def test_greedy_matches_hf(model, key):
    ids = prompt_ids(model, key)
    ours = engine.generate(ids, model.weights, model.cfg, MAX_NEW_TOKENS)
    assert len(ours) == MAX_NEW_TOKENS
    assert ours == hf_greedy(model.dir, ids, MAX_NEW_TOKENS)


def test_prompts_have_different_lengths(model):
    lengths = {key: len(prompt_ids(model, key)) for key in PROMPTS}
    assert len(set(lengths.values())) == len(PROMPTS), lengths


# --- (2) prefill 的 logits 与 Hugging Face 在 float32 误差内相等 ----------------------


@pytest.mark.parametrize("key", ["short", "long"])
def test_prefill_logits_match_hf(model, key):
    ids = prompt_ids(model, key)
    ours = full_logits(model, ids)
    ref = hf_logits(model.dir, ids)
    assert ours.shape == ref.shape == (len(ids), model.cfg.vocab_size)
    assert (ours - ref).abs().max().item() < ATOL


# --- (3) KV cache：增量 decode 与整段重算一致 -------------------------------------


def test_decode_with_cache_equals_recompute(model):
    ids = prompt_ids(model, "long")
    prompt, rest = ids[:-8], ids[-8:]
    reference = full_logits(model, ids)

    # prefill 前面的部分，然后一个 token 一个 token 地喂剩下的 8 个，每步只算 1 个位置。
    cache = engine.KVCache(model.cfg, max_len=len(ids))
    with torch.inference_mode():
        steps = [engine.forward(torch.tensor(prompt), model.weights, model.cfg, cache)[-1]]
        for token in rest:
            steps.append(engine.forward(torch.tensor([token]), model.weights, model.cfg, cache)[-1])
    assert cache.length == len(ids)
    incremental = torch.stack(steps)  # 位置 len(prompt)-1 … len(ids)-1 的 logits
    torch.testing.assert_close(incremental, reference[len(prompt) - 1 :], rtol=0, atol=ATOL)


def test_chunked_prefill_equals_recompute(model):
    """先喂前一半，再一次喂后一半（query 比 key 少的情形）：因果掩码必须右下角对齐。"""
    ids = prompt_ids(model, "long")
    split = len(ids) // 2
    cache = engine.KVCache(model.cfg, max_len=len(ids))
    with torch.inference_mode():
        first = engine.forward(torch.tensor(ids[:split]), model.weights, model.cfg, cache)
        second = engine.forward(torch.tensor(ids[split:]), model.weights, model.cfg, cache)
    torch.testing.assert_close(torch.cat([first, second]), full_logits(model, ids), rtol=0, atol=ATOL)


# --- (4) 这个文件不依赖 minisgl -------------------------------------------------


def imported_modules(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_imports_nothing_from_minisgl():
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    assert not [m for m in imported_modules(tree) if m.split(".")[0] == "minisgl"]
    # 引擎部分（模块顶层）只用标准库与 torch / safetensors / tokenizers；
    # 书的辅助包 minibook 只在 main 里作为模型来源与参照出现。
    top_level = {
        m.split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for m in imported_modules(node)
    }
    assert top_level <= {
        "__future__",
        "argparse",
        "json",
        "os",
        "time",
        "dataclasses",
        "pathlib",
        "torch",
        "safetensors",
        "tokenizers",
    }, top_level


# --- 其他：分词与配置 ------------------------------------------------------------


@pytest.mark.parametrize("key", ["short", "chat"])
def test_tokenization_matches_transformers(key):
    from transformers import AutoTokenizer

    model_dir = smollm2()
    text, chat = PROMPTS[key]
    ours = engine.encode_prompt(engine.load_tokenizer(model_dir), model_dir, text, chat)[1]
    hf = AutoTokenizer.from_pretrained(model_dir)
    if chat:
        ref = hf.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
    else:
        ref = hf(text)["input_ids"]
    assert ours == ref


def test_load_config_reads_head_dim_and_rope_theta(tmp_path):
    # Qwen3-0.6B 的形状：head_dim 128 ≠ hidden/heads = 64；rope_theta 写在顶层（transformers 4.x 风格）。
    raw = {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rope_theta": 1000000,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg = engine.load_config(tmp_path)
    assert (cfg.head_dim, cfg.rope_theta, cfg.num_kv_heads, cfg.qk_norm) == (128, 1e6, 8, True)

    # transformers 5.x 风格：rope_theta 在 rope_parameters 里；没有 head_dim 就用 hidden/heads。
    del raw["head_dim"], raw["rope_theta"]
    raw.update(model_type="llama", rope_parameters={"rope_type": "default", "rope_theta": 1e5})
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg = engine.load_config(tmp_path)
    assert (cfg.head_dim, cfg.rope_theta, cfg.qk_norm) == (64, 1e5, False)

    # 默认的 rope_parameters 旁边还有一个 llama3 缩放的 rope_scaling：两处都查，报错而不是忽略
    raw["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(NotImplementedError, match="RoPE"):
        engine.load_config(tmp_path)
    del raw["rope_scaling"]

    raw["model_type"] = "mistral"
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(NotImplementedError):
        engine.load_config(tmp_path)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_untied_sharded_bf16_checkpoint(tmp_path, arch):
    """书里的两个模型都是 tied、单文件、float32；真实 checkpoint 常常是独立 LM head、多个分片、bf16。"""
    import transformers

    torch.manual_seed(0)
    kwargs = {
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "rope_theta": 5e5,
        "tie_word_embeddings": False,
    }
    if arch == "llama":
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kwargs))
    else:
        hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**kwargs))
    hf.to(torch.bfloat16).save_pretrained(tmp_path, max_shard_size="100KB")
    assert len(list(tmp_path.glob("*.safetensors"))) > 1

    cfg = engine.load_config(tmp_path)
    weights = engine.load_weights(tmp_path, cfg)
    assert not cfg.tie_word_embeddings and weights["lm_head.weight"] is not weights["model.embed_tokens.weight"]
    ids = torch.randint(0, 512, (20,)).tolist()
    cache = engine.KVCache(cfg, max_len=len(ids))
    with torch.inference_mode():
        ours = engine.forward(torch.tensor(ids), weights, cfg, cache)
    # 参照也从磁盘重新读、按 float32 算（不能直接把内存里转过 bf16 的 hf 再 .float()：
    # 它的 RoPE inv_freq 缓冲区也被转成了 bf16，精度已经丢了）。
    ref = hf_logits(tmp_path, ids)
    assert (ours - ref).abs().max().item() < ATOL


def test_untied_checkpoint_without_lm_head_is_an_error(tmp_path):
    """config 说输出层不共享、checkpoint 里却没有 lm_head.weight：报错，而不是悄悄拿词嵌入顶上。"""
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.zeros(8, 4)}, tmp_path / "model.safetensors")
    cfg = dataclasses.replace(engine.load_config(tiny_qwen3()), tie_word_embeddings=False)
    with pytest.raises(KeyError, match="lm_head.weight"):
        engine.load_weights(tmp_path, cfg)


def test_chat_template_gets_special_tokens(tmp_path):
    """用到 bos_token 的模板（如 Llama 3）拿得到它，和 transformers 一样。"""
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": "<s>"},
        "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m['content'] }}]{% endfor %}"}))
    assert engine.chat_prompt(tmp_path, "你好") == "<s>[你好]"
