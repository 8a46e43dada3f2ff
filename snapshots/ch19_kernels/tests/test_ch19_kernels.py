"""第 19 章：自定义算子。

- 三个 C++ 算子（float32、int8、int4 权重的小批量线性层）在随机形状上等于 torch 的参照（量化的两个乘的是
  按组取整成 int8 的 x，取整的结果与 round_activations 逐个相同）；坏输入是中文错误；
- 量化：误差不超过半个刻度（缩放、最小值取在 float16 上）；int4 的装法（低 4 位第 j 个、高 4 位第 j + K/2 个）；
  C++ 读的 16 行交错的块：格子里是哪一行的哪 4 个数，拆回来分毫不差，行数不是 16 的倍数也对；按列切给 TP rank、
  q/k/v 合并都不改变量化结果；书里内置的 SmolLM2 权重本来就在 Q4_1 的格点上，int4 一点不丢；
- 整个引擎：C++ GEMV 的贪心结果与 HF 逐 token 相同；量化后在真实的生成里逐层查：每一层交出的 y 都等于
  "取整的 x 乘取整的 W"（只量化权重的实现过不了），结果和原始 HF 不同；编译后与不编译的 token 相同、不重编；
- 第 17 章的分页注意力（本章重写了内层循环）在长而打散的上下文、几种 head_dim 上等于 SDPA；
- C++ 外壳（compile_cpp_wrapper）：编出来的真是 C++ 外壳，token 不变；没有要编译的 decode 时拒绝；
- 量化后线性层不再留着 float32 权重；设置、命令行的坏值是中文错误；auto 在编不出 C++ 时退回 torch。
"""

from __future__ import annotations

import gc
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.engine.config import EngineConfig
from minisgl.kernel import load_kernels
from minisgl.layers import BaseOP, LinearReplicated, RMSNorm
from minisgl.layers.embedding import ParallelLMHead
from minisgl.layers.hugepages import copy_to_huge_pages, huge_page_bytes
from minisgl.layers.norm import rms_norm
from minisgl.layers.quant import (
    GROUP,
    SMALL_BATCH,
    _linear_ops,
    deinterleave_int4,
    deinterleave_int8,
    dequantize_int4,
    dequantize_int8,
    interleave_int4,
    interleave_int8,
    prepare_linear_layers,
    quantize_int4,
    quantize_activations,
    quantize_int8,
    resolve_cpu_kernels,
    round_activations,
)
from minisgl.llm import LLM
from minisgl.server.args import parse_args

TREE = Path(__file__).resolve().parents[1]
TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,",
         "Write a short story about a robot who learns to paint. Once upon a time,"]
CPU = torch.device("cpu")


def tree_env(**extra: str) -> dict:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TREE), os.environ.get("PYTHONPATH", "")]), **extra}


@pytest.fixture(scope="module", autouse=True)
def kernels():
    load_kernels()


def round_int8(name: str, w: torch.Tensor) -> torch.Tensor:
    return dequantize_int8(*quantize_int8(w))


def round_int4(name: str, w: torch.Tensor) -> torch.Tensor:
    # LM head 在 int4 模式下也是 int8（见 prepare_linear_layers）
    return round_int8(name, w) if name == "lm_head" else dequantize_int4(*quantize_int4(w))


def test_activations_round_to_int8_groups_within_half_a_step():
    """x 每 32 个一组：组内最大绝对值变成 ±127，别的误差不超过半个刻度 dx/2；全 0 的一组 dx = 0、xq = 0。"""
    torch.manual_seed(0)
    x = torch.randn(5, 4 * GROUP) * torch.tensor([1e-3, 1.0, 50.0, 0.0]).repeat_interleave(GROUP)
    xq, dx = quantize_activations(x)
    assert xq.dtype == torch.int8 and dx.shape == (5, 4)
    assert (xq.view(5, 4, GROUP).abs().amax(dim=-1)[:, :3] == 127).all() and (dx[:, 3] == 0).all()
    assert (xq[:, 3 * GROUP:] == 0).all()
    step = dx.repeat_interleave(GROUP, dim=1)
    assert ((round_activations(x) - x).abs() <= step / 2 + 1e-7 * x.abs()).all()


# ---------------------------------------------------------------- 三个算子
@pytest.mark.parametrize("seed", range(6))
def test_the_three_kernels_equal_torch_on_random_shapes(seed):
    rng = random.Random(seed)
    m, n, k = rng.randint(1, SMALL_BATCH), rng.randint(1, 300), 64 * rng.randint(1, 12)
    x, w = torch.randn(m, k), torch.randn(n, k) * rng.choice([0.01, 1.0, 30.0])
    ops = torch.ops.minisgl
    torch.testing.assert_close(ops.linear_f32(x, w), x @ w.T, rtol=1e-4, atol=1e-4 * w.abs().max().item())
    # 量化的两个不限行数（每 8 行一趟）：行数取到 40，几趟和最后不满 8 行的那趟都走到
    x = torch.randn(m if seed % 2 == 0 else rng.randint(9, 40), k)
    if seed % 3 == 0:
        x[:, :GROUP] = 0  # 全是 0 的一组：dx = 0，不能除以它
    xr = round_activations(x)  # 量化的两个算子乘的是取整过的 x：只量化权重的实现差出 1e-2 量级，过不了
    scale = 1e-5 * w.abs().max().item() * x.abs().sum(dim=1).max().item()
    q, d = quantize_int8(w)
    torch.testing.assert_close(ops.linear_int8(x, interleave_int8(q, d), n), xr @ dequantize_int8(q, d).T,
                               rtol=1e-4, atol=scale)
    q4, d4, m4 = quantize_int4(w)
    torch.testing.assert_close(ops.linear_int4(x, interleave_int4(q4, d4, m4), n),
                               xr @ dequantize_int4(q4, d4, m4).T, rtol=1e-4, atol=scale)
    # 恰好落在两个刻度正中间的数（x / dx = k + 0.5）：C++ 和 quant.py 要取到同一个刻度（四舍六入五成双）。
    # 乘（缩放过的）单位矩阵，每个输出就是一个取整过的 x：取错一个刻度差 dx，远大于容差。
    # 对角线取 127/128：缩放 d = 1/128 在 float16 上是精确的，权重量化后分毫不差
    plant_ties(x, rng)
    eye = interleave_int8(*quantize_int8(torch.eye(k) * (127 / 128)))
    torch.testing.assert_close(ops.linear_int8(x, eye, k), round_activations(x) * (127 / 128), rtol=0,
                               atol=1e-5 * x.abs().max().item())


def plant_ties(x: torch.Tensor, rng: random.Random) -> None:
    """每一组放进一个 v，使 v / dx 在 float32 里正好是 k + 0.5（dx、1 / dx 照 quant.py 的算法算）。"""
    for row in range(x.shape[0]):
        for g in range(0, x.shape[1], GROUP):
            group = x[row, g:g + GROUP]
            for _ in range(200):
                amax = torch.tensor(rng.uniform(0.5, 8.0))
                d = amax * (1.0 / 127.0)
                v = (rng.randint(1, 125) + 0.5) * d
                if float(v * (1.0 / d)) % 1 == 0.5 and float(v.abs()) < float(amax):
                    group.clamp_(-float(amax), float(amax))
                    group[0], group[1] = amax, v * rng.choice([1, -1])
                    break


def test_a_non_contiguous_x_is_read_correctly():
    x, w = torch.randn(128, 3).T, torch.randn(40, 128)  # x：不连续的 [3, 128]
    assert not x.is_contiguous()
    torch.testing.assert_close(torch.ops.minisgl.linear_f32(x, w), x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("without", [["avx512vnni"], ["avx512vnni", "avx2"]], ids=["avx2", "plain-loops"])
def test_the_portable_loops_without_vnni_compute_the_same(without):
    """linear.cpp 在没有 AVX-512 VNNI 的机器上走 AVX2 的 vpmaddubsw，连 AVX2 也没有时走普通的整数循环：
    用 -mno-… 另编一份（缓存着，只编一次），在一个只加载它的进程里和 round_activations 的参照比。
    行数到 20：8 行一趟，走到第三趟。"""
    script = """
import random, sys, torch
from minisgl.kernel import CFLAGS, CSRC, _build_key, load_or_build
from minisgl.layers.quant import (dequantize_int4, dequantize_int8, interleave_int4, interleave_int8, quantize_int4,
                                  quantize_int8, round_activations)
without = sys.argv[1:]
flags = CFLAGS + ["-mno-" + isa for isa in without]
sources = [CSRC / "linear.cpp"]  # 只加载这一份：和 load_kernels 的库登记的是同样的算子名
load_or_build("minisgl_linear_portable_" + _build_key(sources) + "_no_" + "_".join(without), sources,
              extra_cflags=flags, extra_ldflags=["-fopenmp"])
ops = torch.ops.minisgl
for seed in range(6):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    m, n, k = rng.randint(1, 20), rng.randint(1, 200), 64 * rng.randint(1, 10)
    x, w = torch.randn(m, k) * rng.choice([0.01, 1.0, 30.0]), torch.randn(n, k)
    xr = round_activations(x)
    q, d = quantize_int8(w)
    torch.testing.assert_close(ops.linear_int8(x, interleave_int8(q, d), n), xr @ dequantize_int8(q, d).T,
                               rtol=1e-4, atol=1e-3)
    q4, d4, m4 = quantize_int4(w)
    torch.testing.assert_close(ops.linear_int4(x, interleave_int4(q4, d4, m4), n),
                               xr @ dequantize_int4(q4, d4, m4).T, rtol=1e-4, atol=1e-3)
print("OK")
"""
    proc = subprocess.run([sys.executable, "-c", script, *without], capture_output=True, text=True, env=tree_env(),
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("OK")


def test_weights_copied_to_huge_pages_keep_their_values_and_outlive_the_buffer():
    tensors = [torch.randn(1000, 77), torch.arange(10, dtype=torch.int8), torch.randn(3, 5).T]  # 最后一个不连续
    copies = copy_to_huge_pages(tensors)
    gc.collect()  # mmap 对象只被张量引用着：它们活着，内存就在
    for t, c in zip(tensors, copies):
        assert torch.equal(t, c) and c.is_contiguous() and c.dtype == t.dtype
        assert c.data_ptr() % 64 == 0 and c.data_ptr() != t.data_ptr()


def test_the_cpp_engine_keeps_its_weights_in_huge_pages_and_tied_weights_stay_shared():
    path = tiny_qwen3()
    before = huge_page_bytes()
    llm = make_llm(path, cpu_kernels="cpp")
    model = llm.engine.model
    head = next(op for _, op in _linear_ops(model) if isinstance(op, ParallelLMHead))
    assert head._matmul.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # 共用的只拷一份
    weights = list(model.state_dict().values())
    start = min(t.data_ptr() for t in weights)
    end = max(t.data_ptr() + t.nbytes for t in weights)
    assert end - start < 1.01 * len({t.data_ptr(): t.nbytes for t in weights}) * 64 + sum(
        {t.data_ptr(): t.nbytes for t in weights}.values())  # 全在一块连续的内存里
    if "[never]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text():
        assert huge_page_bytes() - before >= 2 << 20  # 这台机器给大页：至少有一页落在大页上
    outs = generate(llm, path, 8)
    llm.shutdown()
    assert outs == [hf_greedy(path, encode(path, t), 8) for t in TEXTS]


@pytest.mark.parametrize("call, message", [
    (lambda: torch.ops.minisgl.linear_f32(torch.randn(9, 64), torch.randn(4, 64)), "x 要有 1 到 8 行，收到 9"),
    (lambda: torch.ops.minisgl.linear_f32(torch.randn(0, 64), torch.randn(4, 64)), "x 至少要有 1 行"),
    (lambda: torch.ops.minisgl.linear_f32(torch.randn(2, 64), torch.randn(4, 96)), "x 有 64 列，权重要 96 列"),
    (lambda: torch.ops.minisgl.linear_f32(torch.randn(2, 48), torch.randn(4, 48)), "K 必须是 32 的倍数"),
    (lambda: torch.ops.minisgl.linear_f32(torch.randn(2, 64).double(), torch.randn(4, 64)), "x 必须是 float32"),
    (lambda: torch.ops.minisgl.linear_int8(torch.randn(2, 64), torch.zeros(1, 2, 544), 16),
     r"blocks 必须是连续的 uint8 \[ceil\(N/16\), K/32, 544\]"),
    (lambda: torch.ops.minisgl.linear_int4(torch.randn(2, 64), torch.zeros(1, 2, 544, dtype=torch.uint8), 16),
     r"blocks 必须是连续的 uint8 \[ceil\(N/16\), K/32, 320\]"),  # int8 的块交给 int4
    (lambda: torch.ops.minisgl.linear_int4(torch.randn(2, 64), torch.zeros(2, 2, 320, dtype=torch.uint8), 16),
     "N = 16 和 2 块（每块 16 行）对不上"),
    (lambda: torch.ops.minisgl.linear_int4(torch.randn(2, 96), torch.zeros(1, 2, 320, dtype=torch.uint8), 5),
     "x 有 96 列，权重要 64 列"),
    (lambda: torch.ops.minisgl.linear_int8(torch.randn(0, 64), torch.zeros(1, 2, 544, dtype=torch.uint8), 5),
     "x 至少要有 1 行"),
])
def test_bad_inputs_are_chinese_errors_not_wrong_reads(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---------------------------------------------------------------- RMSNorm
@pytest.mark.parametrize("seed", range(4))
def test_the_norm_kernels_match_torch_rms_norm_on_random_shapes(seed):
    rng = random.Random(seed)
    shape = [rng.randint(1, 40), rng.choice([64, 576, 1000])]
    x, residual = torch.randn(shape) * rng.choice([0.01, 1.0, 50.0]), torch.randn(shape)
    weight, eps = torch.randn(shape[-1]), rng.choice([1e-5, 1e-6])
    torch.testing.assert_close(torch.ops.minisgl.rms_norm(x, weight, eps), rms_norm(x, weight, eps),
                               rtol=1e-5, atol=1e-5)
    out, total = torch.ops.minisgl.add_rms_norm(x, residual, weight, eps)
    assert torch.equal(total, x + residual)  # 加法只有一种做法：逐位相同
    torch.testing.assert_close(out, rms_norm(x + residual, weight, eps), rtol=1e-5, atol=1e-5)


def test_the_norm_reads_a_head_slice_of_qkv():
    qkv = torch.randn(5, 3, 4, 64)  # Qwen3 的 q_norm 收到的是 qkv 里切出来的 q：不连续
    q = qkv[:, 0]
    assert not q.is_contiguous()
    weight = torch.randn(64)
    torch.testing.assert_close(torch.ops.minisgl.rms_norm(q, weight, 1e-6), rms_norm(q, weight, 1e-6),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda: torch.ops.minisgl.rms_norm(torch.randn(2, 64).double(), torch.randn(64).double(), 1e-6),
     "只支持 float32"),
    (lambda: torch.ops.minisgl.rms_norm(torch.randn(2, 64), torch.randn(32), 1e-6), "weight 却有 32 个数"),
    (lambda: torch.ops.minisgl.add_rms_norm(torch.randn(2, 64), torch.randn(3, 64), torch.randn(64), 1e-6),
     "形状、dtype 必须相同"),
])
def test_bad_norm_inputs_are_chinese_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---------------------------------------------------------------- 分页注意力（第 17 章的算子，本章重写了内层循环）
@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-6), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_rewritten_paged_attention_equals_sdpa_on_long_scattered_contexts(dtype, atol):
    """head_dim 64、128 走编译期展开的循环，其他宽度走运行时的 d；上下文比预取的距离长得多，槽位打散。"""
    import torch.nn.functional as F

    rng = random.Random(19)
    for d in (64, 128, 80, 8):
        hkv = rng.choice([1, 3, 8])
        hq = hkv * rng.choice([1, 2, 3])
        lens = [rng.randint(1, 1500) for _ in range(rng.randint(1, 4))]
        gen = torch.Generator().manual_seed(rng.randrange(2**31))
        slots = sum(lens) + 7
        k_cache = torch.randn(slots, hkv, d, generator=gen).to(dtype)
        v_cache = torch.randn(slots, hkv, d, generator=gen).to(dtype)
        perm = torch.randperm(slots, generator=gen).to(torch.int32)
        table = torch.zeros(len(lens), max(lens), dtype=torch.int32)
        start = 0
        for b, n in enumerate(lens):
            table[b, :n] = perm[start: start + n]
            start += n
        q = torch.randn(len(lens), hq, d, generator=gen).to(dtype)  # decode：每个请求 1 个 query
        i32 = dict(dtype=torch.int32)
        got = torch.ops.minisgl.paged_attention(q, k_cache, v_cache, table, torch.arange(len(lens), **i32),
                                                torch.arange(len(lens) + 1, **i32), torch.tensor(lens, **i32),
                                                d ** -0.5)
        for b, n in enumerate(lens):
            idx = table[b, :n].long()
            want = F.scaled_dot_product_attention(
                q[b].float()[:, None], k_cache[idx].float().transpose(0, 1), v_cache[idx].float().transpose(0, 1),
                enable_gqa=True)[:, 0]
            assert (got[b].float() - want).abs().max().item() < atol, (d, n)


# ---------------------------------------------------------------- 量化
def test_quantization_errors_are_at_most_half_a_step():
    w = torch.randn(64, 256) * torch.rand(64, 1) * 10
    q, d = quantize_int8(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127 and d.shape == (64, 256 // GROUP)
    assert torch.equal(d, d.half().float())  # 缩放存成 float16：量化时用的就是 float16 上的值
    step = d.repeat_interleave(GROUP, dim=1)
    assert ((dequantize_int8(q, d) - w).abs() <= step / 2 + 1e-6).all()
    q4, d4, m4 = quantize_int4(w)
    assert q4.dtype == torch.uint8 and q4.shape == (64, 128)
    assert torch.equal(d4, d4.half().float()) and torch.equal(m4, m4.half().float())
    step4 = d4.repeat_interleave(GROUP, dim=1)
    # 最小值取到 float16 上时可能比真正的最小值大一点点（相对 2^-11）：最小的那个数多出这点误差
    slack = 2.0 ** -11 * m4.abs().repeat_interleave(GROUP, dim=1)
    assert ((dequantize_int4(q4, d4, m4) - w).abs() <= step4 / 2 + slack + 1e-6).all()


def test_int4_packs_element_j_low_and_element_j_plus_half_high():
    w = torch.arange(128, dtype=torch.float32).repeat(2, 1) % 16  # 每组 0..15，刻度正好是 1、最小值 0
    q4, d4, m4 = quantize_int4(w)
    assert (d4 == 1).all() and (m4 == 0).all()
    assert q4[0, 5].item() == (5 % 16) | ((69 % 16) << 4)  # 第 5 个字节：低 4 位第 5 个数，高 4 位第 64 + 5 个
    assert torch.equal(dequantize_int4(q4, d4, m4), w)


@pytest.mark.parametrize("seed", range(4))
def test_interleaved_blocks_put_four_numbers_of_one_row_in_each_cell_and_come_back_exactly(seed):
    rng = random.Random(seed)
    n, k = rng.randint(1, 70), 64 * rng.randint(1, 6)  # 行数多半不是 16 的倍数：最后一块补 0 行
    w = torch.randn(n, k) * rng.choice([0.01, 1.0, 30.0])
    q, d = quantize_int8(w)
    blocks = interleave_int8(q, d)
    assert blocks.shape == (-(-n // 16), k // GROUP, 16 * 32 + 32) and blocks.dtype == torch.uint8
    row, g, s = rng.randrange(n), rng.randrange(k // GROUP), rng.randrange(8)  # 第 row 行第 g 组的第 4s..4s+3 个
    cell = blocks[row // 16, g, 64 * s + 4 * (row % 16): 64 * s + 4 * (row % 16) + 4].view(torch.int8)
    assert torch.equal(cell, q[row, GROUP * g + 4 * s: GROUP * g + 4 * s + 4])
    d_cell = blocks[row // 16, g, 512 + 2 * (row % 16): 512 + 2 * (row % 16) + 2].view(torch.float16)
    assert d_cell.item() == d[row, g].item()
    assert all(torch.equal(a, b) for a, b in zip(deinterleave_int8(blocks, n), (q, d)))
    q4 = quantize_int4(w)
    blocks4 = interleave_int4(*q4)
    assert blocks4.shape == (-(-n // 16), k // GROUP, 16 * 16 + 64)
    nibbles = torch.cat([q4[0] & 0xF, q4[0] >> 4], dim=1)  # 每个数一个字节
    s4 = s % 4
    cell4 = blocks4[row // 16, g, 64 * s4 + 4 * (row % 16): 64 * s4 + 4 * (row % 16) + 4]
    assert torch.equal(cell4 & 0xF, nibbles[row, GROUP * g + 4 * s4: GROUP * g + 4 * s4 + 4])
    assert torch.equal(cell4 >> 4, nibbles[row, GROUP * g + 16 + 4 * s4: GROUP * g + 16 + 4 * s4 + 4])
    assert all(torch.equal(a, b) for a, b in zip(deinterleave_int4(blocks4, n), q4))
    if n % 16:
        cells = blocks[-1, :, :512].reshape(k // GROUP, 8, 16, 4)[:, :, n % 16:]
        assert (cells == 0).all()  # 补的行全是 0：算出来的多余输出被切掉，不影响结果


def test_groups_stay_inside_a_row_so_tp_shards_and_merged_layers_quantize_the_same():
    w = torch.randn(96, 256)
    whole = dequantize_int8(*quantize_int8(w))
    by_columns = torch.cat([dequantize_int8(*quantize_int8(part)) for part in w.split(64, dim=1)], dim=1)
    by_rows = torch.cat([dequantize_int4(*quantize_int4(part)) for part in w.split([64, 32], dim=0)])
    assert torch.equal(whole, by_columns)  # 行并行：每个 rank 拿一段列，组的边界对齐 32
    assert torch.equal(dequantize_int4(*quantize_int4(w)), by_rows)  # q/k/v、gate/up 合并：行拼起来


def test_the_embedded_smollm2_weights_already_sit_on_the_q4_1_grid():
    """SmolLM2 是从 Q4_1 的 GGUF 反量化来的：每组 32 个数本来就只有 16 种值，int4 量化分毫不差。"""
    from safetensors import safe_open

    with safe_open(smollm2() / "model.safetensors", "pt") as f:
        w = f.get_tensor("model.layers.3.mlp.down_proj.weight").float()
    assert torch.equal(dequantize_int4(*quantize_int4(w)), w)
    assert not torch.equal(dequantize_int8(*quantize_int8(w)), w)  # int8 的格点是另一套：反而有误差
    with safe_open(tiny_qwen3() / "model.safetensors", "pt") as f:
        r = f.get_tensor("model.layers.0.mlp.down_proj.weight").float()
    assert not torch.equal(dequantize_int4(*quantize_int4(r)), r)  # 随机权重：int4 有误差


class TwoLayers(BaseOP):
    def __init__(self, k_second: int) -> None:
        self.first = LinearReplicated(128, 16)
        self.second = LinearReplicated(k_second, 16)
        self.first.weight, self.second.weight = torch.randn(16, 128), torch.randn(16, k_second)

    def forward(self, x):
        raise NotImplementedError


def test_a_width_that_cannot_be_grouped_is_refused_before_any_layer_changes():
    model = TwoLayers(k_second=96)  # 96 是 32 的倍数，不是 64 的倍数
    with pytest.raises(ValueError, match="second 不能做 int4 量化：每行 96 个数，不是 64 的倍数"):
        prepare_linear_layers(model, "int4")
    assert model.first._matmul is None and "weight" in vars(model.first)  # 一个都没动
    prepare_linear_layers(model, "int8")  # int8 只要 32 的倍数
    assert "weight" not in vars(model.second)  # 量化后 float32 权重删掉了


# ---------------------------------------------------------------- 整个引擎
def make_llm(path, **overrides) -> LLM:
    fields = dict(max_running_req=4, num_page_override=400, max_seq_len_override=80)
    return LLM(path, **{**fields, **overrides})


def walk(op: BaseOP):
    yield op
    for _, child in op.named_children():
        if isinstance(child, BaseOP):
            yield from walk(child)


def generate(llm: LLM, path, n: int) -> list[list[int]]:
    prompts = [encode(path, t) for t in TEXTS]
    return [o["token_ids"] for o in llm.generate(prompts, SamplingParams(max_tokens=n, ignore_eos=True))]


@pytest.mark.parametrize("model", [tiny_qwen3, smollm2], ids=["tiny-qwen3", "smollm2"])
def test_the_cpp_gemv_engine_equals_hf(model):
    path = model()
    llm = make_llm(path, cpu_kernels="cpp")
    assert llm.engine.cpu_kernels == "cpp"
    norms = [op for op in walk(llm.engine.model) if isinstance(op, RMSNorm)]
    assert norms and all(op._cpp for op in norms)  # 每个 RMSNorm（含 q_norm、k_norm）都换成了 C++ 的
    outs = generate(llm, path, 16)
    llm.shutdown()
    for text, out in zip(TEXTS, outs):
        assert out == hf_greedy(path, encode(path, text), 16), text


# 激活取整是不连续的：输入差 1e-6（C++ 和 torch 的 RMSNorm、编译前后就差这么多），落在两个刻度正中间的
# 那些数就取到相邻的刻度，之后的 logits 可以差出零点几。所以量化的引擎不拿贪心的 token 和"同样取整的 HF"
# 逐个比（那个比较本身不成立），而是在真实的生成里，逐层查每一次乘法：拿这一层这一次真的收到的 x，
# 算 round_activations(x) @ W.T，和它交出的 y 比。
@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_every_quantized_layer_computes_rounded_x_times_rounded_w_in_a_real_run(kind):
    path = tiny_qwen3()
    llm = make_llm(path, quantization=kind)
    calls: list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    layers = [(name, op) for name, op in _linear_ops(llm.engine.model)]
    for name, op in layers:
        matmul = op._matmul

        def recording(x, matmul=matmul, name=name):
            y = matmul(x)
            calls.append((name, x.clone(), y.clone(), matmul.dequantize()))
            return y

        op._matmul = recording
    outs = generate(llm, path, 6)  # 5 个请求、同时最多 4 个：prefill 是十几行，decode 是 1–4 行
    llm.shutdown()
    assert {name for name, *_ in calls} == {name for name, _ in layers}  # 每一层都走了量化的乘法
    rows = {x.shape[0] for _, x, _, _ in calls}
    assert min(rows) <= SMALL_BATCH < max(rows)  # 一趟（不超过 8 行）和分几趟的都走到了
    weight_only_differs = 0
    for name, x, y, w in calls:
        want = round_activations(x) @ w.T
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4 * want.abs().max().item(), msg=name)
        weight_only_differs += not torch.allclose(y, x @ w.T, rtol=1e-4, atol=1e-4 * want.abs().max().item())
    assert weight_only_differs > len(calls) // 2  # 只量化权重、不取整 x 的实现过不了
    assert any(out != hf_greedy(path, encode(path, text), 6) for text, out in zip(TEXTS, outs))  # 量化改变了结果


def test_compiled_int4_decode_equals_the_eager_engine_and_never_recompiles():
    path = tiny_qwen3()
    llm = make_llm(path, quantization="int4", cuda_graph_bs=(1, 2, 4))
    outs = generate(llm, path, 12)
    assert llm.engine.graph_runner.compiles == 3
    llm.shutdown()
    eager = make_llm(path, quantization="int4")
    assert generate(eager, path, 12) == outs  # 同样的量化引擎不编译：token 相同
    eager.shutdown()
    assert outs != [hf_greedy(path, encode(path, text), 12) for text in TEXTS]
    # C++ 外壳：inductor 生成的模块里是一段 C++ 源码（CppWrapperCodeCache 编译它），token 仍然相同；
    # 这个选项只在编译时生效，之后 inductor 的全局设置原样还回去
    from torch._inductor.codecache import PyCodeCache

    before = set(map(id, PyCodeCache.modules))
    shell = make_llm(path, quantization="int4", cuda_graph_bs=(4,), compile_cpp_wrapper=True)
    assert torch._inductor.config.cpp_wrapper is False
    new = [m for m in PyCodeCache.modules if id(m) not in before]
    assert new and all("CppWrapperCodeCache" in Path(m.__file__).read_text() for m in new)
    assert generate(shell, path, 12) == outs
    shell.shutdown()


def test_quantized_smollm2_keeps_no_float32_linear_weights():
    llm = make_llm(smollm2(), quantization="int8")
    state = llm.engine.model.state_dict()
    llm.shutdown()
    assert not any(name.endswith(("proj.weight",)) for name in state)  # 线性层的 float32 权重都删了
    assert "model.embed_tokens.weight" in state  # 查表用的嵌入还在


# ---------------------------------------------------------------- 设置与命令行
@pytest.mark.parametrize("fields, message", [
    ({"cpu_kernels": "mkl"}, "cpu_kernels 只能是 auto、torch、cpp"),
    ({"quantization": "int2"}, "quantization 只能是 int8、int4"),
    ({"quantization": "int8", "cpu_kernels": "torch"}, "cpu_kernels 不能是 torch"),
    ({"quantization": "int4", "dtype": torch.bfloat16}, "量化只支持 float32"),
    ({"compile_cpp_wrapper": "yes"}, "compile_cpp_wrapper 必须是 True 或 False"),
])
def test_bad_linear_settings_are_chinese_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(model_path=tiny_qwen3(), **fields)


def test_a_cpp_wrapper_without_compiled_decode_is_refused():
    with pytest.raises(ValueError, match="compile_cpp_wrapper 只在 CPU 上编译 decode 时有用"):
        make_llm(tiny_qwen3(), compile_cpp_wrapper=True)  # 没给 cuda_graph_bs：什么也不编译


def test_auto_is_cpp_only_for_float32_on_cpu():
    assert resolve_cpu_kernels("auto", None, CPU, torch.float32) == "cpp"
    assert resolve_cpu_kernels("auto", None, CPU, torch.bfloat16) == "torch"
    assert resolve_cpu_kernels("torch", None, CPU, torch.float32) == "torch"
    with pytest.raises(ValueError, match="只有 CPU、float32 的版本"):
        resolve_cpu_kernels("cpp", None, torch.device("cuda", 0), torch.float32)


def test_the_launcher_flags():
    args = parse_args(["--model-path", str(tiny_qwen3()), "--quantization", "int4", "--cpu-kernels", "cpp",
                       "--compile-cpp-wrapper"])
    assert (args.quantization, args.cpu_kernels, args.compile_cpp_wrapper) == ("int4", "cpp", True)
    assert parse_args(["--model-path", str(tiny_qwen3())]).compile_cpp_wrapper is False
    proc = subprocess.run([sys.executable, "-m", "minisgl", "--quantization", "int3"],
                          capture_output=True, text=True, timeout=120, cwd=TREE, env=tree_env())
    assert proc.returncode == 2 and "int3" in proc.stderr and "Traceback" not in proc.stderr


def test_without_a_compiler_auto_falls_back_to_torch_and_quantization_says_why(tmp_path):
    script = (
        "import torch\n"
        "from minisgl.kernel import KernelsUnavailable\n"
        "from minisgl.layers.quant import resolve_cpu_kernels\n"
        "assert resolve_cpu_kernels('auto', None, torch.device('cpu'), torch.float32) == 'torch'\n"
        "try:\n"
        "    resolve_cpu_kernels('auto', 'int8', torch.device('cpu'), torch.float32)\n"
        "except KernelsUnavailable as e:\n"
        "    print('ERROR:', e)\n"
    )
    env = tree_env(CXX=str(tmp_path / "no-such-compiler"), TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "ERROR: 本书的 C++ 算子编译不了（找不到 C++ 编译器" in proc.stdout
    assert "线性层和 RMSNorm 退回 torch" in proc.stderr
