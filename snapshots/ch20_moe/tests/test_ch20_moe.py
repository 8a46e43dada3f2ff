"""第 20 章：MoE。参照是 Hugging Face 的 Qwen3MoeForCausalLM（float32）。

- 路由 select_experts 与 HF 的路由逐位相同（归一化开、关）；
- moe_align_block_size 在随机抽的 (M, k, E, 块大小) 上与逐格写出的参照相同：每块只属于一个专家，
  每个 (token, 专家) 格子恰好出现一次，缓冲区长度只取决于形状；
- loop、fused 两个后端在随机输入上等于 HF 的 MoE 块；一半专家加另一半专家 = 全部（EP 的前提）；
- 整个引擎：小 Qwen3-MoE 的贪心输出与 HF 逐 token 相同——两个后端、编译后的 decode、TP=2、EP=2；
  TP=2 时每个 rank 有 8 个半宽的专家，EP=2 时 4 个全宽的专家，只从文件里读自己的那几个；
  每层每步恰好一次 MoE 的 all_reduce，TP 和 EP 一样多、一样大；
- Qwen3-30B-A3B 的配置（随仓库提交）搭在 meta 设备上：总参数 30.5B、每个 token 用到 3.3B；
- python -m minisgl --tp-size 2 --ep-size 2 起的服务，官方 openai 客户端拿到的贪心回答与 HF 相同；
- 坏设置是中文错误：ep_size、切不开的 TP 数、loop 后端录图、top_k 比专家还多、命令行的坏值。
"""

from __future__ import annotations

import json
import multiprocessing.connection as mp_connection
import random
import time

import pytest
import torch
import torch.multiprocessing as mp
from test_ch15_server import descendants, free_port, start_server, stop_server

from minibook.hf import encode, hf_greedy
from minibook.models import qwen3_30b_a3b_config, tiny_qwen3_moe
from minisgl.core import SamplingParams
from minisgl.distributed import set_expert_parallel, set_tp_info
from minisgl.engine.config import EngineConfig
from minisgl.llm import LLM
from minisgl.models import ModelConfig, create_model
from minisgl.moe import FusedMoe, LoopMoe, moe_align_block_size, select_experts
from minisgl.moe.fused import padded_capacity
from minisgl.server.args import parse_args
from minisgl.utils.hf import load_tokenizer

MOE = tiny_qwen3_moe()
TEXTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "1, 2, 3, 4,",
         "The quick brown fox"]
NEW = 10
DEADLINE = 300.0  # 秒：只防挂死，不是计时断言

_HF: dict[tuple, list[int]] = {}


def hf_tokens(text: str, n: int = NEW) -> list[int]:
    if (text, n) not in _HF:
        _HF[(text, n)] = hf_greedy(MOE, encode(MOE, text), n)
    return _HF[(text, n)]


def generate(texts: list[str], **fields) -> list[list[int]]:
    fields.setdefault("num_page_override", 512)
    fields.setdefault("max_seq_len_override", 128)
    llm = LLM(str(MOE), **fields)
    try:
        outs = llm.generate([encode(MOE, t) for t in texts], SamplingParams(max_tokens=NEW, ignore_eos=True))
        return [list(o["token_ids"]) for o in outs]
    finally:
        llm.shutdown()


# ---------------------------------------------------------------- 路由与排块


@pytest.mark.parametrize("renormalize", [True, False])
def test_select_experts_equals_hf_router_bit_for_bit(renormalize):
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

    gen = torch.Generator().manual_seed(int(renormalize))
    hf = Qwen3MoeTopKRouter(Qwen3MoeConfig(hidden_size=64, num_experts=16, num_experts_per_tok=4,
                                           norm_topk_prob=renormalize))
    with torch.no_grad():
        hf.weight.copy_(torch.randn(16, 64, generator=gen))
    x = torch.randn(37, 64, generator=gen)
    logits, want_weights, want_ids = hf(x)
    weights, ids = select_experts(torch.nn.functional.linear(x, hf.weight), 4, renormalize)
    assert torch.equal(ids.long(), want_ids) and ids.dtype == torch.int32
    assert torch.equal(weights, want_weights)
    assert torch.allclose(weights.sum(-1), torch.ones(37)) == renormalize


def align_reference(topk_ids: list[list[int]], block: int, experts: int) -> tuple[list[int], list[int], int]:
    """逐格写出来的参照：每个专家的格子按编号升序排，补空行到整块，再接上全是空行的块。"""
    pairs = sum(map(len, topk_ids))
    k = len(topk_ids[0])
    sorted_ids, expert_ids = [], []
    for e in range(experts):
        mine = [m * k + j for m, row in enumerate(topk_ids) for j, x in enumerate(row) if x == e]
        while len(mine) % block:
            mine.append(pairs)
        sorted_ids += mine
        expert_ids += [e] * (len(mine) // block)
    used = len(sorted_ids)
    capacity = padded_capacity(pairs, experts, block)
    sorted_ids += [pairs] * (capacity - used)
    expert_ids += [-1] * (capacity // block - len(expert_ids))
    return sorted_ids, expert_ids, used


def test_moe_align_block_size_equals_the_reference_on_random_cases():
    rng = random.Random(20)
    for _ in range(60):
        m, experts = rng.randint(1, 40), rng.randint(1, 12)
        k, block = rng.randint(1, experts), rng.choice([1, 2, 4, 16, 64])
        rows = [rng.sample(range(experts), k) for _ in range(m)]
        if rng.random() < 0.4:  # 专家并行：一部分格子不在本 rank 上
            rows = [[x if rng.random() < 0.5 else -1 for x in row] for row in rows]
        sorted_ids, expert_ids, used = moe_align_block_size(torch.tensor(rows, dtype=torch.int32), block, experts)
        want = align_reference(rows, block, experts)
        assert (sorted_ids.tolist(), expert_ids.tolist(), used.item()) == want, (m, k, experts, block)
        assert sorted_ids.dtype == expert_ids.dtype == torch.int32
        # 长度只取决于形状：把路由整个换掉，缓冲区一样长（图捕获要的就是这个）
        other = [rng.sample(range(experts), k) for _ in range(m)]
        again = moe_align_block_size(torch.tensor(other, dtype=torch.int32), block, experts)
        assert again[0].shape == sorted_ids.shape and again[1].shape == expert_ids.shape


# ---------------------------------------------------------------- 后端与 HF 的 MoE 块


def hf_sparse_block(hidden: int, inter: int, experts: int, k: int, seed: int):
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    config = Qwen3MoeConfig(hidden_size=hidden, moe_intermediate_size=inter, num_experts=experts,
                            num_experts_per_tok=k, norm_topk_prob=True)
    config._experts_implementation = "eager"  # 单独建一个块时 transformers 不替我们选，选它的逐专家循环
    block = Qwen3MoeSparseMoeBlock(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return block


@pytest.mark.parametrize("backend", [LoopMoe, FusedMoe])
@pytest.mark.parametrize("seed", range(4))
def test_backends_equal_hf_moe_block(backend, seed):
    rng = random.Random(seed)
    hidden, inter, experts = rng.choice([32, 64]), rng.choice([16, 48]), rng.choice([4, 8, 16])
    k, tokens = rng.randint(1, min(4, experts)), rng.choice([1, 3, 17, 64])
    hf = hf_sparse_block(hidden, inter, experts, k, seed)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want = hf(x[None])[0]
        weights, ids = select_experts(torch.nn.functional.linear(x, hf.gate.weight), k, True)
        got = backend().forward(x, hf.experts.gate_up_proj, hf.experts.down_proj, weights, ids)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", [LoopMoe, FusedMoe])
def test_half_the_experts_plus_the_other_half_is_all_of_them(backend):
    """专家并行的前提：每个 rank 只算自己那几个专家（别的标 -1），各 rank 的结果加起来就是全部。"""
    hf = hf_sparse_block(64, 32, 8, 2, seed=7)
    x = torch.randn(20, 64, generator=torch.Generator().manual_seed(7))
    w1, w2 = hf.experts.gate_up_proj.detach(), hf.experts.down_proj.detach()
    weights, ids = select_experts(x @ hf.gate.weight.detach().T, 2, True)
    whole = backend().forward(x, w1, w2, weights, ids)
    parts = []
    for first in (0, 4):
        local = ids - first
        local = torch.where((local >= 0) & (local < 4), local, -1)
        parts.append(backend().forward(x, w1[first:first + 4], w2[first:first + 4], weights, local))
        assert not torch.equal(parts[-1], whole)  # 每一半都只是一部分
    torch.testing.assert_close(parts[0] + parts[1], whole, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- 整个引擎：与 HF 逐 token 相同


@pytest.mark.parametrize("backend", ["loop", "fused"])
def test_engine_greedy_equals_hf(backend):
    assert generate(TEXTS, moe_backend=backend) == [hf_tokens(t) for t in TEXTS]


def test_compiled_decode_with_the_fused_backend_equals_hf():
    """fused 的缓冲区形状只取决于批大小：decode 能整步编译（第 18 章），每个批大小编一次，输出仍与 HF 相同。"""
    llm = LLM(str(MOE), moe_backend="fused", cuda_graph_bs=(1, 2, 4), num_page_override=512,
              max_seq_len_override=128)
    replays = []
    replay = llm.engine.graph_runner.replay
    llm.engine.graph_runner.replay = lambda batch: replays.append(batch.padded_size) or replay(batch)
    try:
        outs = llm.generate([encode(MOE, t) for t in TEXTS[:3]], SamplingParams(max_tokens=NEW, ignore_eos=True))
        assert [list(o["token_ids"]) for o in outs] == [hf_tokens(t) for t in TEXTS[:3]]
        assert llm.engine.graph_runner.compiles == 3 and replays == [4] * (NEW - 1)  # 3 个请求补成 4
    finally:
        llm.shutdown()


def test_the_loop_backend_refuses_graph_capture_in_chinese():
    with pytest.raises(ValueError, match="loop 后端录不了图"):
        LLM(str(MOE), moe_backend="loop", cuda_graph_bs=(1,), num_page_override=64, max_seq_len_override=64)


# ---------------------------------------------------------------- TP=2 与 EP=2：每个 rank 一个进程


def _rank_main(rank: int, size: int, port: int, out, fields: dict) -> None:
    """rank 进程：建 LLM，数 MoE 层的 all_reduce，生成，把 token、本地专家的形状和通信记录交回去。"""
    try:
        from minisgl.distributed import DistributedCommunicator, DistributedInfo
        from minisgl.layers import MoELayer

        calls: list[tuple[str, tuple[int, ...]]] = []
        original = MoELayer.forward

        def counted(self, x, router_logits):
            before = len(calls)
            y = original(self, x, router_logits)
            calls.append(("moe", tuple(x.shape), len(calls) - before))
            return y

        impl = DistributedCommunicator.plugins[-1]
        real_all_reduce = type(impl).all_reduce

        def all_reduce(self, x):
            calls.append(("all_reduce", tuple(x.shape)))
            return real_all_reduce(self, x)

        MoELayer.forward = counted
        type(impl).all_reduce = all_reduce
        llm = LLM(str(MOE), tp_info=DistributedInfo(rank, size), distributed_port=port,
                  num_page_override=512, max_seq_len_override=128, **fields)
        layer = llm.engine.model.model.layers[1].mlp.experts
        shapes = {"gate_up_proj": tuple(layer.gate_up_proj.shape), "down_proj": tuple(layer.down_proj.shape),
                  "first_expert": layer.first_expert}
        first = layer.gate_up_proj[0].clone()
        calls.clear()
        outs = llm.generate([encode(MOE, t) for t in TEXTS], SamplingParams(max_tokens=NEW, ignore_eos=True))
        llm.shutdown()
        out.send((rank, "ok", {"tokens": [list(o["token_ids"]) for o in outs], "shapes": shapes,
                               "calls": calls, "first_expert_weight": first}))
    except BaseException as e:
        out.send((rank, "error", f"{type(e).__name__}: {e}"))


def run_ranks(size: int, **fields) -> dict[int, dict]:
    ctx = mp.get_context("spawn")
    port, procs, pipes = free_port(), [], []
    for rank in range(size):
        reader, writer = ctx.Pipe(duplex=False)
        procs.append(ctx.Process(target=_rank_main, args=(rank, size, port, writer, fields)))
        procs[-1].start()
        writer.close()
        pipes.append(reader)
    got: dict[int, dict] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        while len(got) < size:
            ready = mp_connection.wait(pipes, timeout=max(0.0, deadline - time.monotonic()))
            assert ready, f"{DEADLINE:.0f} 秒内 rank 没有交回结果"
            for pipe in ready:
                try:
                    rank, status, value = pipe.recv()
                except EOFError:
                    pipes.remove(pipe)
                    assert pipes or len(got) == size, "rank 没交回结果就退出了"
                    continue
                assert status == "ok", f"rank {rank} 出错：{value}"
                got[rank] = value
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    return got


def hf_expert_weights() -> tuple[torch.Tensor, torch.Tensor]:
    """HF 里第 1 层全部专家的 gate_up_proj [8, 256, 256]、down_proj [8, 256, 128]。"""
    from transformers import AutoModelForCausalLM

    from minibook.hf import quiet_transformers

    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(MOE, dtype=torch.float32)
    experts = model.model.layers[1].mlp.experts
    return experts.gate_up_proj.detach(), experts.down_proj.detach()


@pytest.mark.parametrize("ep_size", [1, 2], ids=["tp2", "ep2"])
def test_tp2_and_ep2_equal_hf_and_split_the_experts(ep_size):
    got = run_ranks(2, moe_backend="fused", ep_size=ep_size)
    want = [hf_tokens(t) for t in TEXTS]
    gate_up, _ = hf_expert_weights()
    config = json.loads((MOE / "config.json").read_text())
    experts, inter, hidden = config["num_experts"], config["moe_intermediate_size"], config["hidden_size"]
    for rank, r in got.items():
        assert r["tokens"] == want
        if ep_size == 2:  # 4 个完整的专家：rank 0 是 0–3，rank 1 是 4–7
            assert r["shapes"] == {"gate_up_proj": (experts // 2, 2 * inter, hidden),
                                   "down_proj": (experts // 2, hidden, inter), "first_expert": 4 * rank}
            torch.testing.assert_close(r["first_expert_weight"], gate_up[4 * rank], rtol=0, atol=0)
        else:  # 8 个专家，每个的中间维切一半：gate 的第 rank 段接 up 的第 rank 段
            assert r["shapes"] == {"gate_up_proj": (experts, inter, hidden),
                                   "down_proj": (experts, hidden, inter // 2), "first_expert": 0}
            half = inter // 2
            want_rows = torch.cat([gate_up[0, rank * half:(rank + 1) * half],
                                   gate_up[0, inter + rank * half:inter + (rank + 1) * half]])
            torch.testing.assert_close(r["first_expert_weight"], want_rows, rtol=0, atol=0)
        # 通信：每个 MoE 层每一步恰好一次 all_reduce，大小是 [这一步的 token 数, hidden]
        moe_calls = [c for c in r["calls"] if c[0] == "moe"]
        assert moe_calls and all(c[2] == 1 for c in moe_calls)
        moe_layers = sum(1 for i in range(config["num_hidden_layers"]) if i not in config["mlp_only_layers"])
        steps = sum(1 for c in r["calls"] if c[0] == "moe") // moe_layers
        assert steps == NEW  # 一次 prefill + NEW − 1 次 decode，每一步每个 MoE 层一次
    assert got[0]["calls"] == got[1]["calls"]  # 两个 rank 的通信一模一样（否则会卡在集合通信里）


# ---------------------------------------------------------------- Qwen3-30B-A3B 的形状


def qwen3_30b_a3b_on_meta(tp_size: int = 1, ep: bool = False) -> dict[str, tuple[int, ...]]:
    config = ModelConfig.from_json(qwen3_30b_a3b_config())
    set_tp_info(0, tp_size)
    set_expert_parallel(ep)
    try:
        with torch.device("meta"):
            model = create_model(config)
    finally:
        set_tp_info(0, 1)
        set_expert_parallel(False)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("mlp_only, step", [([], 1), ([0], 1), ([1, 4], 1), ([], 2), ([3], 3)])
def test_dense_and_moe_layers_are_the_ones_hf_builds(mlp_only, step):
    """哪几层是稠密 MLP，由 mlp_only_layers 和 decoder_sparse_step 决定，和 HF 一致（上游每层都建 MoE 块）。"""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    fields = json.loads((MOE / "config.json").read_text())
    fields.update(num_hidden_layers=6, mlp_only_layers=mlp_only, decoder_sparse_step=step)
    with torch.device("meta"):
        ours = create_model(ModelConfig.from_hf(fields)).state_dict()
        theirs = Qwen3MoeForCausalLM(Qwen3MoeConfig(**fields)).state_dict()

    def moe_layers(keys) -> list[int]:
        return sorted({int(k.split(".")[2]) for k in keys if ".mlp.experts." in k})

    assert moe_layers(ours) == moe_layers(theirs)
    assert len(moe_layers(ours)) < 6 or (not mlp_only and step == 1)


def test_qwen3_30b_a3b_has_30_5b_parameters_3_3b_active():
    shapes = qwen3_30b_a3b_on_meta()
    numel = {k: torch.Size(s).numel() for k, s in shapes.items()}
    total = sum(numel.values())
    experts = sum(n for k, n in numel.items() if ".experts." in k)
    active = total - experts + experts * 8 // 128  # 每个 token 只用 128 个专家里的 8 个
    # 官方的说法是 30.5B 总参数、3.3B 激活：这里数出来 30.53B 和 3.35B（后者截到一位小数）
    assert round(total / 1e9, 1) == 30.5 and int(active / 1e8) == 33
    assert shapes["model.layers.0.mlp.experts.gate_up_proj"] == (128, 1536, 2048)
    assert shapes["model.layers.0.mlp.gate.weight"] == (128, 2048)
    tp8, ep8 = qwen3_30b_a3b_on_meta(8), qwen3_30b_a3b_on_meta(8, ep=True)
    assert tp8["model.layers.0.mlp.experts.gate_up_proj"] == (128, 192, 2048)  # 每个专家切成 8 份
    assert ep8["model.layers.0.mlp.experts.gate_up_proj"] == (16, 1536, 2048)  # 每个 rank 16 个整专家


# ---------------------------------------------------------------- 坏设置


def test_bad_moe_settings_are_chinese_errors(tmp_path):
    from minisgl.distributed import DistributedInfo

    with pytest.raises(ValueError, match="ep_size 只能是 1 或 TP 的 rank 数 2"):
        EngineConfig(model_path=MOE, tp_info=DistributedInfo(0, 2), ep_size=4)
    with pytest.raises(ValueError, match="不支持的MoE 后端 'triton'"):
        EngineConfig(model_path=MOE, moe_backend="triton")
    with pytest.raises(ValueError, match="专家有 8 个，不能平均分给 16 个 rank"):
        EngineConfig(model_path=MOE, tp_info=DistributedInfo(0, 16), ep_size=16).check_tp_split()
    config = json.loads((MOE / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "moe_intermediate_size": 200}))
    with pytest.raises(ValueError, match="专家的中间维有 200 个，不能平均分给 16 个 rank.*能用的 TP 数：1、2、4、8）"):
        EngineConfig(model_path=tmp_path, tp_info=DistributedInfo(0, 16)).check_tp_split()
    EngineConfig(model_path=tmp_path, tp_info=DistributedInfo(0, 16), ep_size=16)  # 专家并行时专家不切：切得开
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_experts_per_tok": 9}))
    with pytest.raises(ValueError, match="num_experts_per_tok 要在 1 和 num_experts（8）之间"):
        ModelConfig.from_json(tmp_path)


def test_bad_moe_flags_are_one_chinese_line(capsys):
    for argv, message in ((["--moe-backend", "triton"], "不支持的MoE 后端 'triton'"),
                          (["--tp-size", "2", "--ep-size", "4"], "ep_size 只能是 1 或 TP 的 rank 数 2"),
                          (["--ep-size", "0"], "要 ≥ 1 的整数")):
        with pytest.raises(SystemExit) as exit_info:
            parse_args(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


# ---------------------------------------------------------------- 真的服务器：TP=2、EP=2


def test_served_ep2_greedy_equals_hf(tmp_path):
    from openai import OpenAI

    server = start_server(tmp_path / "server.log", "--model-path", str(MOE), "--tp-size", "2", "--ep-size", "2",
                          "--moe-backend", "fused", "--num-pages", "512")
    family = descendants(server.proc.pid)
    try:
        client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=120, max_retries=0)
        tokenizer = load_tokenizer(MOE)
        for text in TEXTS[:2]:
            out = client.completions.create(model=MOE.name, prompt=text, max_tokens=NEW, temperature=0,
                                            extra_body={"ignore_eos": True})
            assert out.choices[0].text == tokenizer.decode(hf_tokens(text))
    finally:
        stop_server(server, family)
