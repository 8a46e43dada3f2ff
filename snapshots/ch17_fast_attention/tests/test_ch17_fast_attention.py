"""第 17 章：更快的注意力后端。

- paged 算子（C++，隔着页表读 KV 池）与 SDPA 参照一致：随机的不规则批次（decode、prefill、
  命中前缀缓存）、GQA、打乱的槽位、float32 与 bfloat16；坏的元数据（长度、行号、槽位、形状）
  是一条中文错误，不是越界读；
- 整个引擎用 paged、混合（torch,paged）、auto 时贪心结果与 HF 逐 token 相同；
- decode 不再按页表拷 K/V（数 index_select），元数据一步只算一次、全是张量；
- 后端的名字在用户给的地方检查；编不出 C++ 算子时 auto 退回 torch，paged 说清楚为什么不能用；
- FlashInfer 和 FA3 的布局与我们的页表说的是同一批槽位。
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.attention import (
    HybridBackend,
    PagedAttnBackend,
    PagedAttnMetadata,
    SDPAAttnBackend,
    causal_mask_bottom_right,
    create_attention_backend,
    resolve_attention_backend,
)
from minisgl.attention.layout import fa3_layout, flashinfer_layout
from minisgl.core import SamplingParams
from minisgl.engine.config import EngineConfig
from minisgl.kernel import load_kernels
from minisgl.kvcache import MHAKVCachePool
from minisgl.llm import LLM

TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,"]
TREE = Path(__file__).resolve().parents[1]  # 这一章的树：子进程在这里找到 minisgl


def tree_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(TREE), **extra}


@pytest.fixture(scope="module", autouse=True)
def kernels():
    load_kernels()  # 第一次编译要十几秒：整个文件只付一次


# ---------------------------------------------------------------- 算子本身
def random_batch(rng: random.Random, dtype: torch.dtype):
    """一个不规则的批次：每个请求 n_k 个 key、最后 n_q 个是这一步的 query；槽位在池子里打乱。"""
    hkv = rng.choice([1, 2, 3])
    hq = hkv * rng.choice([1, 3, 4])
    d = rng.choice([16, 64, 128])
    B = rng.randint(1, 6)
    lens_k = [rng.randint(1, 70) for _ in range(B)]
    decode = rng.random() < 0.5
    lens_q = [1 if decode else rng.randint(1, n) for n in lens_k]
    width = max(lens_k) + rng.randint(0, 5)
    num_slots = sum(lens_k) + rng.randint(1, 20)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    k_cache = torch.randn(num_slots, hkv, d, generator=gen).to(dtype)
    v_cache = torch.randn(num_slots, hkv, d, generator=gen).to(dtype)
    page_table = torch.zeros(B + 2, width, dtype=torch.int32)
    rows = rng.sample(range(B + 2), B)  # 行号不必连续、不必有序
    perm = torch.randperm(num_slots, generator=gen)
    start = 0
    for row, n in zip(rows, lens_k):
        page_table[row, :n] = perm[start: start + n].to(torch.int32)
        start += n
    q = torch.randn(sum(lens_q), hq, d, generator=gen).to(dtype)
    return q, k_cache, v_cache, page_table, rows, lens_q, lens_k


def reference(q, k_cache, v_cache, page_table, rows, lens_q, lens_k):
    """float32 的 SDPA：先按页表取出 K/V，右下对齐的因果掩码。"""
    out, start = [], 0
    for row, n_q, n_k in zip(rows, lens_q, lens_k):
        slots = page_table[row, :n_k].long()
        qi = q[start: start + n_q].float().transpose(0, 1)[None]
        ki = k_cache[slots].float().transpose(0, 1)[None]
        vi = v_cache[slots].float().transpose(0, 1)[None]
        o = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=causal_mask_bottom_right(n_q, n_k),
                                           enable_gqa=True)
        out.append(o[0].transpose(0, 1))
        start += n_q
    return torch.cat(out)


def call_kernel(q, k_cache, v_cache, page_table, rows, lens_q, lens_k):
    indptr = [0]
    for n in lens_q:
        indptr.append(indptr[-1] + n)
    i32 = dict(dtype=torch.int32)
    return torch.ops.minisgl.paged_attention(
        q, k_cache, v_cache, page_table, torch.tensor(rows, **i32), torch.tensor(indptr, **i32),
        torch.tensor(lens_k, **i32), q.shape[-1] ** -0.5)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-6), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_paged_kernel_equals_sdpa_on_random_ragged_batches(dtype, atol):
    rng = random.Random(17)
    for _ in range(40):
        case = random_batch(rng, dtype)
        got = call_kernel(*case)
        want = reference(*case)
        assert got.dtype == dtype and got.shape == case[0].shape
        assert (got.float() - want).abs().max().item() < atol


def test_paged_kernel_reads_only_the_slots_of_the_page_table():
    """没被页表指到的槽位填 nan：只要读到一个，结果里就有 nan。"""
    rng = random.Random(3)
    q, k_cache, v_cache, page_table, rows, lens_q, lens_k = random_batch(rng, torch.float32)
    used = torch.zeros(k_cache.shape[0], dtype=torch.bool)
    for row, n in zip(rows, lens_k):
        used[page_table[row, :n].long()] = True
    unused = int((~used).nonzero()[0])
    for row, n in zip(rows, lens_k):
        page_table[row, n:] = unused  # 行尾（超出长度的列）也指向 nan 的槽位：读过了头就露馅
    k_cache[~used] = float("nan")
    v_cache[~used] = float("nan")
    out = call_kernel(q, k_cache, v_cache, page_table, rows, lens_q, lens_k)
    assert not out.isnan().any()
    assert torch.allclose(out, reference(q, k_cache, v_cache, page_table, rows, lens_q, lens_k), atol=2e-6)


@pytest.mark.parametrize("spoil,message", [
    (lambda c: {**c, "lens_k": [c["table"].shape[1] + 1]}, "长度不对"),  # key 比页表还宽
    (lambda c: {**c, "q": torch.randn(11, 6, 16), "lens_q": [11]}, "长度不对"),  # 11 个 query、只有 10 个 key
    (lambda c: {**c, "q": torch.randn(4, 6, 16)}, "qo_indptr"),  # q 的 token 数和 qo_indptr 对不上
    (lambda c: {**c, "rows": [c["table"].shape[0]]}, "行号越界"),
    (lambda c: {**c, "q": c["q"][:, :5].contiguous()}, "头数"),  # 5 个 q 头配不上 2 个 KV 头
    (lambda c: {**c, "k": torch.randn(20, 0, 16), "v": torch.randn(20, 0, 16)}, "头数"),  # 没有 KV 头
    (lambda c: {**c, "v": torch.randn(12, 2, 16)}, "形状要相同"),  # v 比 k 少几个槽位
    (lambda c: {**c, "table": torch.full((2, 20), 10**8, dtype=torch.int32)}, "不在 KV 池里"),
    (lambda c: {**c, "table": torch.full((2, 20), -5, dtype=torch.int32)}, "不在 KV 池里"),
], ids=["key 比页表宽", "query 比 key 多", "token 数对不上", "行号越界", "头数", "没有 KV 头", "v 的形状",
        "槽位太大", "槽位是负数"])
def test_bad_metadata_is_a_clear_error_not_an_out_of_bounds_read(spoil, message):
    d = 16
    case = {"q": torch.randn(3, 6, d), "k": torch.randn(20, 2, d), "v": torch.randn(20, 2, d),
            "table": torch.arange(40, dtype=torch.int32).view(2, 20) % 20, "rows": [1], "lens_q": [3],
            "lens_k": [10]}
    bad = spoil(case)
    with pytest.raises(RuntimeError, match=message):
        call_kernel(bad["q"], bad["k"], bad["v"], bad["table"], bad["rows"], bad["lens_q"], bad["lens_k"])


# ---------------------------------------------------------------- 整个引擎
def make_llm(path, backend: str, **overrides) -> LLM:
    fields = dict(max_running_req=3, page_size=4, num_page_override=96, max_seq_len_override=112,
                  max_extend_tokens=24, attention_backend=backend)
    return LLM(path, **{**fields, **overrides})


@pytest.mark.parametrize("backend", ["paged", "torch,paged", "auto"])
@pytest.mark.parametrize("model", [smollm2, tiny_qwen3], ids=["smollm2", "tiny_qwen3"])
def test_engine_greedy_equals_hf_with_each_backend(model, backend):
    """共享前缀（命中前缀缓存）、长提示分块 prefill、请求陆续进出，重叠开着。"""
    path = model()
    system = encode(path, "You are a helpful assistant. Answer briefly and clearly, please. " * 2)
    prompts = [system + encode(path, t) for t in TEXTS] + [encode(path, TEXTS[0])]
    max_tokens = [9, 4, 12, 6, 7]
    llm = make_llm(path, backend)
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out["token_ids"] == hf_greedy(path, prompt, n)
    llm.cache_manager.check_integrity()
    llm.shutdown()


def test_auto_on_cpu_is_sdpa_for_prefill_and_paged_for_decode():
    assert resolve_attention_backend("auto", "cpu") == "torch,paged"
    assert resolve_attention_backend("auto", "cuda:0") == "torch"  # GPU 上没有 paged 算子
    pool = MHAKVCachePool(2, 1, 8, 4, 1, torch.float32, "cpu")
    table = torch.zeros(2, 4, dtype=torch.int32)
    backend = create_attention_backend("auto", pool, table)
    assert isinstance(backend, HybridBackend)
    assert isinstance(backend.prefill_backend, SDPAAttnBackend)
    assert isinstance(backend.decode_backend, PagedAttnBackend)
    assert isinstance(create_attention_backend("paged,paged", pool, table), PagedAttnBackend)


def count_index_selects(llm: LLM) -> tuple[int, int]:
    """跑到 decode，数一步 decode 前向里 aten::index_select 的次数；返回（次数，层数）。"""
    path_prompt = encode(llm.engine.config.model_path, TEXTS[2])
    llm.generate([path_prompt], SamplingParams(max_tokens=2, ignore_eos=True))  # 热身
    counts = []
    forward = llm.engine.forward_batch

    def profiled(batch, args):
        if not batch.is_decode:
            return forward(batch, args)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = forward(batch, args)
            llm.engine.synchronize()
        counts.append(sum(e.count for e in prof.key_averages() if e.key == "aten::index_select"))
        return out

    llm.engine.forward_batch = profiled  # type: ignore[method-assign]
    llm.generate([path_prompt], SamplingParams(max_tokens=3, ignore_eos=True))
    return min(counts), llm.engine.model_config.num_layers


def test_decode_reads_the_pool_in_place_instead_of_copying_each_layer(monkeypatch):
    monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")  # profiler 在调度器线程上看得到全部算子
    path = tiny_qwen3()
    copies = {}
    for backend in ("torch", "torch,paged"):
        llm = make_llm(path, backend)
        copies[backend] = count_index_selects(llm)
        llm.shutdown()
    selects, layers = copies["torch"]
    assert selects >= 2 * layers  # 参照后端每层按页表取 K、V 各一次
    assert copies["torch,paged"][0] == selects - 2 * layers  # paged：这两次都没有了（剩下的是嵌入层之类）


def test_metadata_is_planned_once_per_step_and_is_all_tensors(monkeypatch):
    path = tiny_qwen3()
    llm = make_llm(path, "paged")
    backend = llm.engine.attn_backend
    plans, forwards = [], []
    prepare, forward = backend.prepare_metadata, backend.forward

    def counting_prepare(batch):
        prepare(batch)
        plans.append(batch.attn_metadata)

    def counting_forward(q, k, v, layer_id, batch):
        forwards.append(batch.attn_metadata)
        return forward(q, k, v, layer_id, batch)

    monkeypatch.setattr(backend, "prepare_metadata", counting_prepare)
    monkeypatch.setattr(backend, "forward", counting_forward)
    llm.generate([encode(path, t) for t in TEXTS[:2]], SamplingParams(max_tokens=4, ignore_eos=True))
    layers = llm.engine.model_config.num_layers
    assert len(forwards) == layers * len(plans)  # 每一步算一次，每一层用同一份
    assert all(forwards[i] is plans[i // layers] for i in range(len(forwards)))
    for meta in plans:
        assert isinstance(meta, PagedAttnMetadata)
        for value in vars(meta).values():
            assert isinstance(value, torch.Tensor) and value.dtype == torch.int32
    llm.shutdown()


# ---------------------------------------------------------------- 名字与退路
@pytest.mark.parametrize("name,message", [("flash", "不支持的注意力后端 'flash'"),
                                          ("torch,fa", "不支持的注意力后端 'fa'"),
                                          ("torch,paged,torch", "最多两个名字")])
def test_a_bad_backend_name_is_one_chinese_error(name, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(model_path="unused", attention_backend=name)


def test_the_launcher_rejects_a_bad_backend_before_starting_anything():
    proc = subprocess.run([sys.executable, "-m", "minisgl", "--attention-backend", "flash"],
                          capture_output=True, text=True, timeout=120, cwd=TREE, env=tree_env())
    assert proc.returncode == 2
    assert "不支持的注意力后端 'flash'" in proc.stderr and "Traceback" not in proc.stderr


def test_without_a_compiler_auto_falls_back_to_torch_and_paged_says_why(tmp_path):
    """没有编译器（CXX 指向一个不存在的程序、空的扩展缓存）：auto 退回 torch 并说一行；paged 报错说原因。"""
    script = (
        "import torch\n"
        "from minisgl.attention import create_attention_backend, SDPAAttnBackend\n"
        "from minisgl.kernel import KernelsUnavailable\n"
        "from minisgl.kvcache import MHAKVCachePool\n"
        "pool = MHAKVCachePool(2, 1, 8, 4, 1, torch.float32, 'cpu')\n"
        "table = torch.zeros(2, 4, dtype=torch.int32)\n"
        "assert type(create_attention_backend('auto', pool, table)) is SDPAAttnBackend\n"
        "try:\n"
        "    create_attention_backend('paged', pool, table)\n"
        "except KernelsUnavailable as e:\n"
        "    print('ERROR:', e)\n"
    )
    env = tree_env(CXX=str(tmp_path / "no-such-compiler"), TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"ERROR: 本书的 C++ 算子编译不了（找不到 C++ 编译器 {tmp_path / 'no-such-compiler'}）" in proc.stdout
    assert "注意力后端退回 torch" in proc.stderr


# ---------------------------------------------------------------- GPU 库的布局
def slots_from_flashinfer(layout, i: int, page_size: int) -> list[int]:
    pages = layout["kv_indices"][layout["kv_indptr"][i]: layout["kv_indptr"][i + 1]].tolist()
    slots = [p * page_size + o for p in pages for o in range(page_size)]
    return slots[: len(slots) - page_size + int(layout["last_page_len"][i])]


def slots_from_fa3(layout, i: int, page_size: int) -> list[int]:
    n = int(layout["cache_seqlens"][i])
    return [int(layout["page_table"][i, j // page_size]) * page_size + j % page_size for j in range(n)]


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_flashinfer_and_fa3_layouts_name_the_same_slots_as_our_page_table(page_size):
    path = tiny_qwen3()
    llm = make_llm(path, "torch", page_size=page_size, num_page_override=512 // page_size)
    batches = []
    prepare = llm.engine.attn_backend.prepare_metadata

    def recording(batch):
        prepare(batch)
        table = llm.engine.page_table
        batches.append((list(batch.padded_reqs), flashinfer_layout(table, batch.padded_reqs, page_size),
                        fa3_layout(table, batch.padded_reqs, page_size),
                        [table[r.table_idx, : r.device_len].tolist() for r in batch.padded_reqs],
                        [r.extend_len for r in batch.padded_reqs]))

    llm.engine.attn_backend.prepare_metadata = recording
    llm.generate([encode(path, t) for t in TEXTS], SamplingParams(max_tokens=5, ignore_eos=True))
    assert batches
    for reqs, fi, fa, slots, lens_q in batches:
        assert fi["qo_indptr"].tolist() == fa["cu_seqlens_q"].tolist()
        assert torch.diff(fi["qo_indptr"]).tolist() == lens_q
        for i in range(len(reqs)):
            assert slots_from_flashinfer(fi, i, page_size) == slots[i]
            assert slots_from_fa3(fa, i, page_size) == slots[i]
    llm.shutdown()


# ---------------------------------------------------------------- 元数据缓冲区的竞态（上游 #103）
def test_a_reused_metadata_buffer_breaks_under_overlap_unless_written_on_the_stream():
    """examples/ch17_plan_race.py 自己断言四种写法的结果：重叠时当场改写缓冲区的那一种和 HF 不一致，
    其余三种（每步新张量、写入排在工作线程上、不重叠）一致。"""
    env = tree_env()
    env.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING", None)
    proc = subprocess.run([sys.executable, "examples/ch17_plan_race.py"], capture_output=True, text=True,
                          timeout=600, cwd=TREE, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("与 HF 一致的请求 3/3") == 3
