"""第 3 章的测试：ModelConfig、注册表、shard_tensor 的每条切分规则、load_weight 的流式切分与合并、
meta 设备上的模型，以及整模型的 logits / 贪心生成与 Hugging Face 一致（单卡，和模拟的 TP=2、TP=16）。

还没有 KV 缓存，所以注意力后端是本文件里的 NoCacheAttention：每个请求只和本步自己的 token 做因果注意力。
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from minibook.hf import encode, hf_greedy, hf_logits
from minibook.models import qwen3_06b_config, smollm2, tiny_qwen3
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import minisgl.distributed.info as tp_info_module
from minisgl.core import Batch, Context, Req, SamplingParams, set_global_ctx
from minisgl.distributed import DistributedCommunicator, DistributedImpl, DistributedInfo, get_tp_info, set_tp_info
from minisgl.models import MODEL_REGISTRY, ModelConfig, create_model, load_weight, shard_tensor

PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "Once upon a time, there was a little"]


# ---------------------------------------------------------------- 公共设施

@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """张量都很小：单线程更快，在几个进程抢两个核的机器上也不会被线程同步拖慢。"""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def clean_globals(monkeypatch):
    """每个测试前后：TP 信息回到"从没登记过"，没有全局上下文，通信插件恢复原样。"""
    monkeypatch.setattr(tp_info_module, "_TP_INFO", None)
    monkeypatch.setattr(DistributedCommunicator, "plugins", list(DistributedCommunicator.plugins))
    set_global_ctx(None)
    yield
    set_global_ctx(None)


class NoCacheAttention:
    def forward(self, q, k, v, layer_id, batch):
        outs, start = [], 0
        group = q.shape[1] // k.shape[1]
        for req in batch.reqs:
            assert req.cached_len == 0
            end = start + req.extend_len
            qi = q[start:end].transpose(0, 1)
            ki = k[start:end].transpose(0, 1).repeat_interleave(group, dim=0)
            vi = v[start:end].transpose(0, 1).repeat_interleave(group, dim=0)
            outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=True).transpose(0, 1))
            start = end
        return torch.cat(outs)


class ThreadComm(DistributedImpl):
    """单进程模拟 TP：每个 rank 一个线程，集合通信时在栅栏处等齐。"""

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size, timeout=120)  # 只防死锁
        self._slots: list = [None] * size
        self._me = threading.local()

    def _exchange(self, x):
        self._slots[self._me.rank] = x
        self._barrier.wait()
        parts = list(self._slots)
        self._barrier.wait()
        return parts

    def all_reduce(self, x):
        return torch.stack(self._exchange(x)).sum(dim=0)

    def all_gather(self, x):
        return torch.cat(self._exchange(x), dim=0)

    def run(self, fn) -> list:
        results: list = [None] * self.size
        errors: list[BaseException] = []

        def worker(rank: int) -> None:
            self._me.rank = rank
            try:
                results[rank] = fn(rank)
            except BaseException as e:
                errors.append(e)
                self._barrier.abort()

        threads = [threading.Thread(target=worker, args=(r,)) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        return results


def new_ctx() -> Context:
    ctx = Context(page_size=1)
    ctx.attn_backend = NoCacheAttention()
    set_global_ctx(ctx)
    return ctx


def prefill_batch(prompts: list[list[int]]) -> Batch:
    reqs = [Req(input_ids=torch.tensor(p, dtype=torch.int32), table_idx=i, cached_len=0, output_len=1,
                uid=i, sampling_params=SamplingParams(), cache_handle=None) for i, p in enumerate(prompts)]
    batch = Batch(reqs=reqs, phase="prefill")
    batch.padded_reqs = reqs
    batch.input_ids = torch.cat([r.input_ids for r in reqs])
    batch.positions = torch.cat([torch.arange(len(p), dtype=torch.int32) for p in prompts])
    return batch


def prefill(model, prompts: list[list[int]]) -> torch.Tensor:
    ctx = new_ctx()
    with ctx.forward_batch(prefill_batch(prompts)):
        return model.forward()


def build(path: Path, rank: int = 0, size: int = 1, dtype=torch.float32):
    config = ModelConfig.from_json(path)
    set_tp_info(rank, size)
    try:
        with torch.device("meta"):
            model = create_model(config)
        model.load_state_dict(dict(load_weight(path, config, dtype=dtype)))
    finally:
        set_tp_info(0, 1)
    return model


def load_as(rank: int, size: int, path: Path, config: ModelConfig, **kwargs) -> list[tuple[str, torch.Tensor]]:
    """以第 rank 个（共 size 个）rank 的身份加载：先登记，load_weight 自己从 get_tp_info() 读。"""
    set_tp_info(rank, size)
    try:
        return list(load_weight(path, config, **kwargs))
    finally:
        set_tp_info(0, 1)


def full_tensors(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


@pytest.fixture(scope="module")
def qwen3_model():
    return build(tiny_qwen3())


@pytest.fixture(scope="module")
def smollm2_model():
    return build(smollm2())


# ---------------------------------------------------------------- ModelConfig

BASE_HF = {
    "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 8, "vocab_size": 100, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 256,
}


def test_config_from_folder_and_file_agree():
    path = tiny_qwen3()
    a, b = ModelConfig.from_json(path), ModelConfig.from_json(path / "config.json")
    raw = json.loads((path / "config.json").read_text())
    assert a == b
    assert (a.architecture, a.num_layers, a.num_qo_heads, a.num_kv_heads, a.head_dim) == (
        "Qwen3ForCausalLM", raw["num_hidden_layers"], raw["num_attention_heads"],
        raw["num_key_value_heads"], raw["head_dim"])
    assert a.rope_theta == float(raw["rope_theta"]) and isinstance(a.rope_theta, float)
    assert a.tie_word_embeddings is True
    q06 = ModelConfig.from_json(qwen3_06b_config())
    assert q06.num_qo_heads * q06.head_dim != q06.hidden_size  # head_dim 不能用 hidden / 头数推出来


def test_config_defaults():
    c = ModelConfig.from_hf(BASE_HF)
    assert c.num_kv_heads == 8  # 没写 num_key_value_heads：没有 GQA
    assert c.head_dim == 64 // 8  # 没写 head_dim：hidden / 头数
    assert c.rope_theta == 10000.0 and c.tie_word_embeddings is False and c.attention_bias is False
    c = ModelConfig.from_hf({**BASE_HF, "num_key_value_heads": 2, "head_dim": 32, "rope_scaling": None})
    assert (c.num_kv_heads, c.head_dim) == (2, 32)
    assert ModelConfig.from_hf({**BASE_HF, "rope_scaling": {"rope_type": "default"}}).head_dim == 8


@pytest.mark.parametrize("field", ["architectures", "num_hidden_layers", "hidden_size", "vocab_size",
                                   "rms_norm_eps", "max_position_embeddings"])
def test_config_missing_field_is_named(field):
    hf = {k: v for k, v in BASE_HF.items() if k != field}
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_hf(hf)


@pytest.mark.parametrize("scaling", [{"rope_type": "yarn", "factor": 4.0}, {"type": "linear", "factor": 2.0},
                                     {"rope_type": "llama3", "factor": 8.0}])
def test_config_rejects_rope_scaling(scaling):
    with pytest.raises(ValueError, match="rope_scaling"):
        ModelConfig.from_hf({**BASE_HF, "rope_scaling": scaling})


def test_config_rejects_scaling_in_rope_parameters():
    hf = {**BASE_HF, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}}
    with pytest.raises(ValueError, match="rope_parameters.*yarn"):
        ModelConfig.from_hf(hf)


@pytest.mark.parametrize("act", ["gelu", "relu", "gelu_pytorch_tanh"])
def test_config_rejects_activations_the_engine_lacks(act):
    assert ModelConfig.from_hf({**BASE_HF, "hidden_act": "silu"}).num_layers == 2
    with pytest.raises(ValueError, match=f"hidden_act={act!r}"):
        ModelConfig.from_hf({**BASE_HF, "hidden_act": act})


# 下面几个测试用的 config.json 都由装着的 transformers 自己写：它改了写法，测试就跟着看到。
HF_CONFIG_CLASSES = ["LlamaConfig", "Qwen3Config"]


def saved_by_transformers(folder: Path, cls_name: str, **kwargs) -> Path:
    import transformers

    arch = cls_name.replace("Config", "ForCausalLM")
    config = getattr(transformers, cls_name)(
        architectures=[arch], vocab_size=100, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=32768, **kwargs)
    config.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("cls_name", HF_CONFIG_CLASSES)
def test_config_reads_rope_theta_where_transformers_writes_it(tmp_path, cls_name):
    folder = saved_by_transformers(tmp_path, cls_name, rope_theta=1e6)
    raw = json.loads((folder / "config.json").read_text())
    written = (raw.get("rope_parameters") or {}).get("rope_theta", raw.get("rope_theta"))
    assert written == 1e6  # transformers 5 写进 rope_parameters，4 写在顶层
    config = ModelConfig.from_json(folder)
    assert config.rope_theta == 1e6 and config.architecture == cls_name.replace("Config", "ForCausalLM")


@pytest.mark.parametrize("cls_name", HF_CONFIG_CLASSES)
def test_config_refuses_llama3_scaling_written_by_transformers(tmp_path, cls_name):
    import transformers

    llama3 = {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    key = "rope_parameters" if int(transformers.__version__.split(".")[0]) >= 5 else "rope_scaling"
    folder = saved_by_transformers(tmp_path, cls_name, **{key: llama3})
    with pytest.raises(ValueError, match="llama3"):
        ModelConfig.from_json(folder)


def test_config_refuses_gelu_written_by_transformers(tmp_path):
    folder = saved_by_transformers(tmp_path, "LlamaConfig", hidden_act="gelu")
    with pytest.raises(ValueError, match="hidden_act"):
        ModelConfig.from_json(folder)


def test_config_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        ModelConfig.from_json(tmp_path)


def test_registry_names_what_is_supported():
    assert {"LlamaForCausalLM", "Qwen3ForCausalLM"} <= set(MODEL_REGISTRY)  # 第 20 章再登记 Qwen3-MoE
    config = ModelConfig.from_hf({**BASE_HF, "architectures": ["MistralForCausalLM"]})
    with pytest.raises(ValueError, match="MistralForCausalLM") as info:
        create_model(config)
    assert "LlamaForCausalLM" in str(info.value) and "Qwen3ForCausalLM" in str(info.value)


# ---------------------------------------------------------------- shard_tensor

def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("key", ["model.layers.3.self_attn.q_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                                 "model.layers.0.mlp.up_proj.weight", "model.layers.0.self_attn.q_proj.bias"])
def test_shard_rows(key, size):
    value = randn(16, 6) if key.endswith("weight") else randn(16)
    shards = [shard_tensor(key, value, r, size, num_kv_heads=2) for r in range(size)]
    assert all(s.shape[0] == 16 // size for s in shards)
    assert torch.equal(torch.cat(shards), value)


@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("key", ["model.layers.0.self_attn.o_proj.weight", "model.layers.1.mlp.down_proj.weight"])
def test_shard_cols(key, size):
    value = randn(6, 16)
    shards = [shard_tensor(key, value, r, size, num_kv_heads=2) for r in range(size)]
    assert all(s.shape == (6, 16 // size) and s.is_contiguous() for s in shards)
    assert torch.equal(torch.cat(shards, dim=1), value)


@pytest.mark.parametrize("num_q, num_kv, size", [(16, 8, 1), (16, 8, 2), (16, 8, 8), (16, 8, 16),
                                                 (8, 2, 4), (8, 2, 8), (4, 1, 4), (9, 3, 3)])
@pytest.mark.parametrize("proj", ["k_proj", "v_proj"])
def test_shard_kv_heads_pair_with_the_ranks_q_heads(num_q, num_kv, size, proj):
    d = 4
    value = torch.arange(num_kv * d * 3, dtype=torch.float32).view(num_kv * d, 3)  # 第 h 个头是第 h 段行
    bias = torch.arange(num_kv * d, dtype=torch.float32)
    local_q = num_q // size
    group = num_q // num_kv
    for rank in range(size):
        shard = shard_tensor(f"model.layers.0.self_attn.{proj}.weight", value, rank, size, num_kv)
        bshard = shard_tensor(f"model.layers.0.self_attn.{proj}.bias", bias, rank, size, num_kv)
        # 本 rank 的 q 头在完整模型里用到的 KV 头，就是本 rank 该存的 KV 头
        needed = sorted({h // group for h in range(rank * local_q, (rank + 1) * local_q)})
        expected = torch.cat([value[h * d : (h + 1) * d] for h in needed])
        assert torch.equal(shard, expected)
        assert torch.equal(bshard, torch.cat([bias[h * d : (h + 1) * d] for h in needed]))
    if size > num_kv:  # 复制：每个 KV 头恰好出现在 size / num_kv 个 rank 上
        owners = [shard_tensor(f"x.{proj}.weight", value, r, size, num_kv)[0, 0].item() // (d * 3)
                  for r in range(size)]
        assert all(owners.count(h) == size // num_kv for h in range(num_kv))


@pytest.mark.parametrize("vocab, size", [(10, 1), (10, 2), (10, 3), (11, 4), (7, 4)])
@pytest.mark.parametrize("key", ["model.embed_tokens.weight", "lm_head.weight"])
def test_shard_vocab_pads_the_last_rank(key, vocab, size):
    value = randn(vocab, 5) + 10  # 没有 0：补出来的零行一眼可辨
    per = -(-vocab // size)
    shards = [shard_tensor(key, value, r, size, num_kv_heads=1) for r in range(size)]
    assert all(s.shape == (per, 5) for s in shards)
    joined = torch.cat(shards)
    assert torch.equal(joined[:vocab], value)
    assert torch.all(joined[vocab:] == 0) and joined.shape[0] - vocab == per * size - vocab


@pytest.mark.parametrize("key", ["model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                                 "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
                                 "model.norm.weight", "model.layers.0.self_attn.o_proj.bias",
                                 "model.layers.0.mlp.down_proj.bias"])
def test_shard_replicated(key):
    value = randn(12)
    for rank in range(4):
        assert torch.equal(shard_tensor(key, value, rank, 4, num_kv_heads=2), value)


@pytest.mark.parametrize("key, shape, size, kv", [
    ("model.layers.0.self_attn.q_proj.weight", (10, 4), 4, 2),
    ("model.layers.0.mlp.gate_proj.weight", (9, 4), 2, 2),
    ("model.layers.0.mlp.down_proj.weight", (4, 9), 2, 2),
    ("model.layers.0.self_attn.o_proj.weight", (4, 6), 4, 2),
    ("model.layers.0.self_attn.k_proj.weight", (24, 4), 3, 8),  # 8 个 KV 头切不成 3 份
    ("model.layers.0.self_attn.v_proj.weight", (12, 4), 8, 3),  # 3 个头复制不到 8 个 rank 上
])
def test_shard_rejects_sizes_that_do_not_divide(key, shape, size, kv):
    with pytest.raises(ValueError):
        shard_tensor(key, randn(*shape), 0, size, num_kv_heads=kv)


# ---------------------------------------------------------------- load_weight

@pytest.mark.parametrize("size", [1, 2])
def test_load_weight_yields_exactly_the_models_weights(size):
    path = tiny_qwen3()
    config = ModelConfig.from_json(path)
    for rank in range(size):
        set_tp_info(rank, size)
        with torch.device("meta"):
            model = create_model(config)
        expected = {k: v.shape for k, v in model.state_dict().items()}
        set_tp_info(0, 1)
        loaded = load_as(rank, size, path, config)
        names = [k for k, _ in loaded]
        assert len(names) == len(set(names))  # 每个键只交出一次
        assert {k: v.shape for k, v in loaded} == expected
        modules = {k.split(".")[-2] for k in names}
        assert {"qkv_proj", "gate_up_proj"} <= modules  # 合并过：q/k/v、gate/up 不再单独出现
        assert not modules & {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}
        assert "lm_head.weight" not in names
        assert all(v.dtype == torch.float32 and v.device.type == "cpu" for _, v in loaded)
        model.load_state_dict(dict(loaded))  # 能整个换进 meta 模型


def test_load_weight_reads_the_registered_tp_info():
    """load_weight 没有 tp_info 参数：和建层一样只从 get_tp_info() 读，切出来的是登记的那个 rank 的。"""
    path = tiny_qwen3()
    config = ModelConfig.from_json(path)
    full = full_tensors(path)
    key = "model.layers.0.mlp.down_proj.weight"
    shards = [dict(load_as(rank, 2, path, config))[key] for rank in range(2)]
    for rank, shard in enumerate(shards):
        assert torch.equal(shard, full[key].chunk(2, dim=1)[rank])
    assert get_tp_info() == DistributedInfo(0, 1)  # load_as 用完恢复单卡


def test_load_weight_dtype():
    path = tiny_qwen3()
    loaded = dict(load_weight(path, ModelConfig.from_json(path), dtype=torch.bfloat16))
    assert all(v.dtype == torch.bfloat16 for v in loaded.values())


@pytest.mark.parametrize("size", [1, 2, 4, 16])
def test_merging_after_sharding_equals_slicing_the_merged_weight(size):
    path = tiny_qwen3()
    config = ModelConfig.from_json(path)
    full = full_tensors(path)
    d = config.head_dim
    local_q = config.num_qo_heads // size
    local_kv = max(config.num_kv_heads // size, 1)
    group = config.num_qo_heads // config.num_kv_heads
    p = "model.layers.2."
    inter = config.intermediate_size // size
    for rank in range(size):
        loaded = dict(load_as(rank, size, path, config))
        first_kv = rank * local_q // group
        qkv = torch.cat([full[p + "self_attn.q_proj.weight"][rank * local_q * d : (rank + 1) * local_q * d],
                         full[p + "self_attn.k_proj.weight"][first_kv * d : (first_kv + local_kv) * d],
                         full[p + "self_attn.v_proj.weight"][first_kv * d : (first_kv + local_kv) * d]])
        assert torch.equal(loaded[p + "self_attn.qkv_proj.weight"], qkv)
        gate_up = torch.cat([full[p + "mlp.gate_proj.weight"][rank * inter : (rank + 1) * inter],
                             full[p + "mlp.up_proj.weight"][rank * inter : (rank + 1) * inter]])
        assert torch.equal(loaded[p + "mlp.gate_up_proj.weight"], gate_up)


@pytest.mark.parametrize("size", [2, 4])
def test_rank_shards_reassemble_to_the_full_weights(size):
    path = tiny_qwen3()
    config = ModelConfig.from_json(path)
    whole = dict(load_weight(path, config))
    ranks = [dict(load_as(r, size, path, config)) for r in range(size)]
    d, V = config.head_dim, config.vocab_size
    q, kv = config.num_qo_heads * d // size, config.num_kv_heads * d // size
    inter = config.intermediate_size // size
    for key, value in whole.items():
        parts = [r[key] for r in ranks]
        if key.endswith("qkv_proj.weight"):
            split = [t.split([q, kv, kv]) for t in parts]
            joined = torch.cat([torch.cat([s[i] for s in split]) for i in range(3)])
        elif key.endswith("gate_up_proj.weight"):
            split = [t.split([inter, inter]) for t in parts]
            joined = torch.cat([torch.cat([s[i] for s in split]) for i in range(2)])
        elif key.endswith(("o_proj.weight", "down_proj.weight")):
            joined = torch.cat(parts, dim=1)
        elif key.endswith("embed_tokens.weight"):
            joined = torch.cat(parts)[:V]
        else:  # 归一化层：每个 rank 一份完整的
            assert all(torch.equal(t, value) for t in parts), key
            continue
        assert torch.equal(joined, value), key


def test_shards_do_not_keep_the_full_tensor_alive():
    """切出来的每一块都有自己的内存：交出去的不能是完整张量的视图，否则完整张量永远释放不掉。"""
    def owns(t: torch.Tensor) -> bool:
        return t.untyped_storage().nbytes() == t.numel() * t.element_size()

    cases = {"model.layers.0.self_attn.q_proj.weight": randn(16, 6), "model.layers.0.self_attn.k_proj.weight": randn(8, 6),
             "model.layers.0.mlp.down_proj.weight": randn(6, 16), "model.embed_tokens.weight": randn(12, 6),
             "lm_head.weight": randn(11, 6)}
    for key, value in cases.items():
        for size in (2, 4):
            for rank in range(size):
                shard = shard_tensor(key, value, rank, size, num_kv_heads=2)
                assert owns(shard) and shard.is_contiguous(), (key, size, rank)
    path = tiny_qwen3()
    loaded = dict(load_as(0, 2, path, ModelConfig.from_json(path)))
    assert all(owns(t) for t in loaded.values()), [k for k, t in loaded.items() if not owns(t)]


def test_meta_model_allocates_nothing():
    config = ModelConfig.from_json(qwen3_06b_config())
    for size in (1, 16):
        set_tp_info(0, size)
        with torch.device("meta"):
            model = create_model(config)
        state = model.state_dict()
        assert state and all(t.is_meta for t in state.values())
        # embed、最后的 norm，加上每层 8 个（2 个 layernorm、qkv、q_norm、k_norm、o、gate_up、down）；没有 lm_head
        assert len(state) == 2 + 8 * config.num_layers
    set_tp_info(0, 1)


# ---------------------------------------------------------------- 自己造的小模型：bias、不共享的 LM head、多余的键

def make_synthetic(folder: Path, *, tie: bool, extra: dict[str, torch.Tensor], rope_theta: float = 1e4) -> Path:
    """用 transformers 造一个随机的小 Llama（q/k/v/o 带 bias），存成 HF 目录，再往 safetensors 里加几个键。

    config.json 是 transformers 的 save_pretrained 写的：它放 rope_theta 的地方就是我们要读的地方。
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=51, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, attention_bias=True,
                         tie_word_embeddings=tie, max_position_embeddings=128, rope_theta=rope_theta,
                         rms_norm_eps=1e-6)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if "norm" not in name else 0.2) + ("norm" in name))
    model.save_pretrained(folder, safe_serialization=True)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors.update({k: v(tensors) for k, v in extra.items()})
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def synthetic_untied(tmp_path_factory):
    return make_synthetic(tmp_path_factory.mktemp("untied"), tie=False, rope_theta=1e6, extra={
        "model.layers.0.self_attn.rotary_emb.inv_freq": lambda t: torch.ones(4)})  # 旧导出会带上它


@pytest.fixture(scope="module")
def synthetic_tied(tmp_path_factory):
    return make_synthetic(tmp_path_factory.mktemp("tied"), tie=True, extra={
        "lm_head.weight": lambda t: t["model.embed_tokens.weight"].clone()})


def test_tied_lm_head_in_the_file_is_skipped(synthetic_tied):
    with safe_open(str(synthetic_tied / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" in f.keys()
    config = ModelConfig.from_json(synthetic_tied)
    names = [k for k, _ in load_weight(synthetic_tied, config)]
    assert "lm_head.weight" not in names


def test_untied_lm_head_is_loaded_and_split(synthetic_untied):
    config = ModelConfig.from_json(synthetic_untied)
    full = full_tensors(synthetic_untied)["lm_head.weight"]
    for size in (1, 2):
        parts = [dict(load_as(r, size, synthetic_untied, config))["lm_head.weight"]
                 for r in range(size)]
        assert all(p.shape == (-(-51 // size), 32) for p in parts)
        assert torch.equal(torch.cat(parts)[:51], full)
        assert not any("rotary_emb" in k for k in dict(load_weight(synthetic_untied, config)))


@pytest.mark.parametrize("folder", ["synthetic_untied", "synthetic_tied"])
def test_synthetic_models_match_transformers(folder, request):
    path = request.getfixturevalue(folder)
    prompts = [[1, 5, 9, 50, 3], [7], [2, 2, 40]]
    logits = prefill(build(path), prompts)
    for i, p in enumerate(prompts):
        torch.testing.assert_close(logits[i], hf_logits(path, p)[-1], atol=1e-4, rtol=1e-4)


def test_incomplete_merge_group_is_an_error(tmp_path, synthetic_untied):
    tensors = full_tensors(synthetic_untied)
    del tensors["model.layers.1.self_attn.v_proj.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((synthetic_untied / "config.json").read_text())
    config = ModelConfig.from_json(tmp_path)
    with pytest.raises(ValueError, match="model.layers.1.self_attn.qkv_proj"):
        list(load_weight(tmp_path, config))
    with pytest.raises(FileNotFoundError):
        list(load_weight(tmp_path / "nowhere", config))


# ---------------------------------------------------------------- 整模型与 HF 对照

def test_qwen3_logits_match_hf_in_one_batch(qwen3_model):
    path = tiny_qwen3()
    prompts = [encode(path, p) for p in PROMPTS]
    assert len({len(p) for p in prompts}) == len(prompts)  # 长度各不相同
    logits = prefill(qwen3_model, prompts)
    assert logits.shape == (3, 49152) and logits.dtype == torch.float32
    for i, p in enumerate(prompts):
        assert (logits[i] - hf_logits(path, p)[-1]).abs().max() < 1e-4


def test_smollm2_logits_match_hf_in_one_batch(smollm2_model):
    path = smollm2()
    prompts = [encode(path, p) for p in PROMPTS]
    logits = prefill(smollm2_model, prompts)
    for i, p in enumerate(prompts):
        assert (logits[i] - hf_logits(path, p)[-1]).abs().max() < 1e-4


def test_batching_does_not_mix_requests(qwen3_model):
    prompts = [encode(tiny_qwen3(), p) for p in PROMPTS]
    together = prefill(qwen3_model, prompts)
    alone = torch.cat([prefill(qwen3_model, [p]) for p in prompts])
    torch.testing.assert_close(together, alone, atol=1e-4, rtol=1e-4)


def greedy(model, prompts: list[list[int]], n: int) -> list[list[int]]:
    seqs = [list(p) for p in prompts]
    for _ in range(n):
        for seq, t in zip(seqs, prefill(model, seqs).argmax(dim=-1).tolist()):
            seq.append(t)
    return [s[len(p):] for s, p in zip(seqs, prompts)]


def test_greedy_without_cache_matches_hf(qwen3_model, smollm2_model):
    path = tiny_qwen3()
    prompts = [encode(path, p) for p in PROMPTS[:2]]
    for p, new in zip(prompts, greedy(qwen3_model, prompts, 6)):
        assert new == hf_greedy(path, p, 6)
    path = smollm2()
    prompt = encode(path, PROMPTS[0])
    assert greedy(smollm2_model, [prompt], 4)[0] == hf_greedy(path, prompt, 4)


@pytest.mark.parametrize("size", [2, 16])
def test_simulated_tensor_parallel_matches_hf(size):
    """每个 rank 一个线程，各自只有自己那份权重；TP=16 时 8 个 KV 头复制到 16 个 rank 上。"""
    path = tiny_qwen3()
    models = [build(path, rank, size) for rank in range(size)]
    comm = ThreadComm(size)
    DistributedCommunicator.plugins.append(comm)
    prompts = [encode(path, p) for p in PROMPTS[:2]]
    ctx = new_ctx()
    with ctx.forward_batch(prefill_batch(prompts)):
        outs = comm.run(lambda r: models[r].forward())
    for out in outs:
        for i, p in enumerate(prompts):
            assert (out[i] - hf_logits(path, p)[-1]).abs().max() < 1e-4


def test_simulated_tensor_parallel_with_bias_and_untied_head(synthetic_untied):
    models = [build(synthetic_untied, rank, 2) for rank in range(2)]
    assert "model.layers.0.self_attn.o_proj.bias" in models[0].state_dict()
    comm = ThreadComm(2)
    DistributedCommunicator.plugins.append(comm)
    prompts = [[1, 5, 9, 50, 3], [7, 8]]
    ctx = new_ctx()
    with ctx.forward_batch(prefill_batch(prompts)):
        outs = comm.run(lambda r: models[r].forward())
    for out in outs:
        for i, p in enumerate(prompts):
            torch.testing.assert_close(out[i], hf_logits(synthetic_untied, p)[-1], atol=1e-4, rtol=1e-4)
