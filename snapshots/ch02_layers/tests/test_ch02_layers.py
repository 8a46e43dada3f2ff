"""第 2 章的测试：BaseOP 的权重导入导出、RMSNorm / RoPE 对照 transformers、激活、
各线性层与词表层在模拟的 TP=1/2/4（以及 16）下与不切分时一致、LM head 取行、注意力层的顺序。

TP 的模拟：每个 rank 一个线程，建层前 set_tp_info(rank, size)，权重从完整的随机权重里切出来，
集合通信由 ThreadComm 插件在线程之间完成。
"""

from __future__ import annotations

import threading
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

import minisgl.distributed.info as tp_info_module
from minisgl.core import Batch, Context, Req, SamplingParams, set_global_ctx
from minisgl.distributed import (
    DistributedCommunicator,
    DistributedImpl,
    DistributedInfo,
    get_tp_info,
    local_kv_heads,
    set_tp_info,
)
from minisgl.layers import (
    AttentionLayer,
    BaseOP,
    LinearColParallelMerged,
    LinearOProj,
    LinearQKVMerged,
    LinearReplicated,
    LinearRowParallel,
    OPList,
    ParallelLMHead,
    RMSNorm,
    RMSNormFused,
    RotaryEmbedding,
    VocabParallelEmbedding,
    get_rope,
    silu_and_mul,
)


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


class ThreadComm(DistributedImpl):
    """每个 rank 一个线程；集合通信时在栅栏处等齐，再求和 / 拼接。sent 记下各 rank 交出去的张量。"""

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size, timeout=60)  # 只防死锁，正常几毫秒就等齐
        self._slots: list = [None] * size
        self._me = threading.local()
        self.sent: list[list[tuple[str, torch.Tensor]]] = [[] for _ in range(size)]

    def _exchange(self, op: str, x: torch.Tensor) -> list[torch.Tensor]:
        rank = self._me.rank
        self.sent[rank].append((op, x.clone()))
        self._slots[rank] = x
        self._barrier.wait()
        parts = list(self._slots)
        self._barrier.wait()
        return parts

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack(self._exchange("all_reduce", x)).sum(dim=0)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(self._exchange("all_gather", x), dim=0)

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


def install_comm(size: int) -> ThreadComm:
    comm = ThreadComm(size)
    DistributedCommunicator.plugins.append(comm)  # 层用的是最后一个插件
    return comm


class ForbiddenComm(DistributedImpl):
    """tp=1 时层不该通信：一旦被调用就报错。"""

    def all_reduce(self, x):
        raise AssertionError("tp=1 时不应调用 all_reduce")

    def all_gather(self, x):
        raise AssertionError("tp=1 时不应调用 all_gather")


def build_ranks(size: int, make: Callable[[], BaseOP],
                load: dict[str, Callable[[int, int], torch.Tensor]] | None = None) -> list:
    """依次为每个 rank 登记 TP 位置、建层、（可选）换上切好的权重。"""
    layers = []
    for rank in range(size):
        set_tp_info(rank, size)
        layer = make()
        if load is not None:
            layer.load_state_dict({name: cut(rank, size) for name, cut in load.items()})
        layers.append(layer)
    set_tp_info(0, 1)
    return layers


def rows(w: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    n = w.shape[0] // size
    assert n * size == w.shape[0]
    return w[rank * n : (rank + 1) * n]


def cols(w: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    n = w.shape[1] // size
    assert n * size == w.shape[1]
    return w[:, rank * n : (rank + 1) * n]


def heads(w: torch.Tensor, first: int, count: int, head_dim: int) -> torch.Tensor:
    return w[first * head_dim : (first + count) * head_dim]


def make_batch(extend_lens: list[int], phase: str = "prefill", cached: list[int] | None = None) -> Batch:
    cached = cached or [0] * len(extend_lens)
    reqs = [
        Req(input_ids=torch.arange(c + n, dtype=torch.int32), table_idx=i, cached_len=c,
            output_len=4, uid=i, sampling_params=SamplingParams(), cache_handle=None)
        for i, (n, c) in enumerate(zip(extend_lens, cached))
    ]
    batch = Batch(reqs=reqs, phase=phase)
    batch.padded_reqs = reqs
    batch.positions = torch.cat([torch.arange(r.cached_len, r.device_len) for r in reqs])
    batch.input_ids = torch.cat([r.input_ids[r.cached_len :] for r in reqs])
    return batch


def close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> None:
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-5)


# ---------------------------------------------------------------- 分布式信息

def test_local_kv_heads_split_or_replicate():
    # 8 个 KV 头：TP 2 平分成 4 个；TP 16 每个 rank 1 个（复制）；6 个 rank 分不匀
    assert [local_kv_heads(8, tp) for tp in (1, 2, 8, 16)] == [8, 4, 1, 1]
    with pytest.raises(ValueError):
        local_kv_heads(8, 6)
    set_tp_info(1, 4)
    try:
        assert local_kv_heads(8) == 2  # 不给 tp_size 时用本进程登记的
    finally:
        set_tp_info(0, 1)


def test_tp_info_defaults_and_validation():
    assert get_tp_info() == DistributedInfo(0, 1)
    info = set_tp_info(3, 4)
    assert get_tp_info() is info and not info.is_primary()
    assert DistributedInfo(0, 2).is_primary()
    for rank, size in [(2, 2), (-1, 2), (0, 0)]:
        with pytest.raises(ValueError):
            DistributedInfo(rank, size)


# ---------------------------------------------------------------- BaseOP

class Leaf(BaseOP):
    def __init__(self, n: int) -> None:
        self.weight = torch.zeros(n, 2)
        self.bias = torch.zeros(n)
        self._cache = torch.ones(7)  # 下划线：不是权重
        self.size = n  # 不是张量：不是权重

    def forward(self, x):
        return x


class Tree(BaseOP):
    def __init__(self) -> None:
        self.embed = Leaf(3)
        self.layers = OPList([Leaf(1), Leaf(2)])
        self.scale = torch.zeros(())

    def forward(self, x):
        return x


def test_state_dict_names_follow_attributes():
    sd = Tree().state_dict(prefix="model.")
    assert list(sd) == [
        "model.embed.weight", "model.embed.bias",
        "model.layers.0.weight", "model.layers.0.bias",
        "model.layers.1.weight", "model.layers.1.bias",
        "model.scale",
    ]
    assert sd["model.layers.1.weight"].shape == (2, 2)


def test_load_state_dict_assigns_real_tensors_into_a_meta_model():
    with torch.device("meta"):
        tree = Tree()
    assert all(t.is_meta for t in tree.state_dict().values())
    new = {k: torch.randn(v.shape) for k, v in tree.state_dict().items()}
    tree.load_state_dict(new)
    sd = tree.state_dict()
    assert all(sd[k] is new[k] for k in new)  # 替换，不是拷贝
    assert tree.layers[1].weight is new["layers.1.weight"]
    assert len(tree.layers) == 2 and [op.weight.shape[0] for op in tree.layers] == [1, 2]


def test_load_state_dict_with_prefix():
    tree = Tree()
    new = {"model." + k: torch.ones(v.shape) for k, v in tree.state_dict().items()}
    tree.load_state_dict(new, prefix="model.")
    assert tree.embed.weight is new["model.embed.weight"]


def good_state() -> dict[str, torch.Tensor]:
    return {k: torch.randn(v.shape) for k, v in Tree().state_dict().items()}


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda s: s.pop("layers.1.bias"), "缺少 layers.1.bias"),
        (lambda s: s.update({"layers.2.weight": torch.zeros(1)}), "多出 layers.2.weight"),
        (lambda s: s.update({"embed.weight": torch.zeros(3, 3)}), "embed.weight"),
        (lambda s: s.update({"scale": torch.zeros((), dtype=torch.float16)}), "scale"),
    ],
    ids=["missing", "unexpected", "shape", "dtype"],
)
def test_load_state_dict_rejects_bad_input_and_changes_nothing(edit, match):
    tree = Tree()
    before = tree.state_dict()
    state = good_state()
    edit(state)
    with pytest.raises(ValueError, match=match):
        tree.load_state_dict(state)
    after = tree.state_dict()
    assert all(after[k] is before[k] for k in before)  # 先全部检查，再赋值：出错时一个都没换


def test_oplist_is_only_a_container():
    ops = OPList([Leaf(1)])
    with pytest.raises(TypeError):
        ops.forward()
    with pytest.raises(TypeError):
        BaseOP()  # forward 是抽象方法


# ---------------------------------------------------------------- RMSNorm

def hf_rmsnorm(weight: torch.Tensor, eps: float) -> LlamaRMSNorm:
    norm = LlamaRMSNorm(weight.shape[0], eps=eps).to(weight.dtype)
    norm.weight.data.copy_(weight)
    return norm


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-6), (torch.bfloat16, 1e-2)])
def test_rmsnorm_matches_transformers(dtype, atol):
    gen = torch.Generator().manual_seed(0)
    weight = (1 + 0.3 * torch.randn(64, generator=gen)).to(dtype)
    x = (3 * torch.randn(5, 7, 64, generator=gen)).to(dtype)  # 也可以作用在 [T, 头, head_dim] 上
    ours = RMSNorm(64, eps=1e-6)
    ours.weight = weight
    with torch.no_grad():
        ref = hf_rmsnorm(weight, 1e-6)(x)
    out = ours.forward(x)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref.float(), atol=atol, rtol=atol)


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-6), (torch.bfloat16, 1e-2)])
def test_rmsnorm_fused_adds_residual_first(dtype, atol):
    gen = torch.Generator().manual_seed(1)
    weight = (1 + 0.3 * torch.randn(32, generator=gen)).to(dtype)
    x, res = (torch.randn(2, 6, 32, generator=gen)).to(dtype)
    norm = RMSNormFused(32, eps=1e-5)
    norm.weight = weight
    ref = hf_rmsnorm(weight, 1e-5)
    with torch.no_grad():
        out, new_res = norm.forward(x, res)
        torch.testing.assert_close(new_res, x + res)
        torch.testing.assert_close(out.float(), ref(x + res).float(), atol=atol, rtol=atol)
        out0, res0 = norm.forward(x)  # 第一层：没有残差，残差就是 x
        assert torch.equal(res0, x)
        torch.testing.assert_close(out0.float(), ref(x).float(), atol=atol, rtol=atol)


# ---------------------------------------------------------------- RoPE

def hf_rope(q, k, positions, head_dim, base):
    """transformers 的 Llama RoPE。q/k 是 [T, 头, d]，HF 要 [batch, 头, T, d]。"""
    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                         rope_theta=base, max_position_embeddings=8192)
    rotary = LlamaRotaryEmbedding(config)
    cos, sin = rotary(q, positions[None].long())
    hq, hk = apply_rotary_pos_emb(q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin)
    return hq[0].transpose(0, 1), hk[0].transpose(0, 1)


@pytest.mark.parametrize("head_dim, base", [(64, 10000.0), (32, 1_000_000.0), (128, 100000.0)])
def test_rope_matches_transformers_at_arbitrary_positions(head_dim, base):
    gen = torch.Generator().manual_seed(2)
    positions = torch.tensor([17, 3, 250, 0, 4095, 3, 1000])  # 各请求的位置混在一起，不是 0..T-1
    q = torch.randn(len(positions), 4, head_dim, generator=gen)
    k = torch.randn(len(positions), 2, head_dim, generator=gen)
    q0 = q.clone()
    rope = RotaryEmbedding(head_dim, head_dim, max_position=8192, base=base)
    out_q, out_k = rope.forward(positions, q, k)
    ref_q, ref_k = hf_rope(q, k, positions, head_dim, base)
    close(out_q, ref_q, atol=1e-4)
    close(out_k, ref_k, atol=1e-4)
    assert torch.equal(q, q0)  # 返回新张量，不改输入


def test_rope_partial_rotary_dim_leaves_the_rest_alone():
    gen = torch.Generator().manual_seed(3)
    positions = torch.tensor([5, 9, 100])
    q, k = torch.randn(2, 3, 2, 64, generator=gen)
    rope = RotaryEmbedding(64, 32, max_position=512, base=10000.0)
    out_q, out_k = rope.forward(positions, q, k)
    assert torch.equal(out_q[..., 32:], q[..., 32:]) and torch.equal(out_k[..., 32:], k[..., 32:])
    ref_q, ref_k = hf_rope(q[..., :32].contiguous(), k[..., :32].contiguous(), positions, 32, 10000.0)
    close(out_q[..., :32], ref_q, atol=1e-5)
    close(out_k[..., :32], ref_k, atol=1e-5)


def test_rope_dot_product_depends_only_on_distance():
    gen = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 1, 1, 64, generator=gen)
    rope = RotaryEmbedding(64, 64, max_position=4096, base=10000.0)
    dots = []
    for pq, pk in [(7, 2), (100, 95), (3000, 2995)]:
        rq, _ = rope.forward(torch.tensor([pq]), q, k)
        _, rk = rope.forward(torch.tensor([pk]), q, k)
        dots.append((rq * rk).sum().item())
    assert max(dots) - min(dots) < 1e-3
    rq, _ = rope.forward(torch.tensor([7]), q, k)
    _, rk = rope.forward(torch.tensor([3]), q, k)
    assert abs((rq * rk).sum().item() - dots[0]) > 1e-3  # 距离变了，点积就变


def test_rope_asserts_on_bad_rotary_dim_and_get_rope_is_cached():
    with pytest.raises(AssertionError):  # 内部不变量：由 ModelConfig 保证，这里只 assert
        RotaryEmbedding(64, 65, 16, 10000.0)
    with pytest.raises(AssertionError):
        RotaryEmbedding(64, 128, 16, 10000.0)
    assert get_rope(64, 64, 128, 10000.0) is get_rope(64, 64, 128, 10000.0)
    assert get_rope(64, 64, 128, 10000.0) is not get_rope(64, 64, 128, 500000.0)
    assert get_rope(64, 64, 128, 10000.0).state_dict() == {}  # cos/sin 表不是权重


def test_rope_tables_move_once_by_rope_tables_to_never_inside_forward():
    """前向不搬表（GPU 上那是一次隐藏的同步）：表和 q 不在一个设备上就 assert；
    rope_tables_to 把 get_rope 发出去的每张表都搬过去。meta 设备在这里充当"另一个设备"。"""
    from minisgl.layers import rope_tables_to, rotary

    rope = get_rope(8, 8, 32, 10000.0)
    other = get_rope(16, 16, 32, 10000.0)
    saved = {key: (r._cos, r._sin) for key, r in rotary._ROPES.items()}  # 别的测试建的表也会被搬
    positions = torch.tensor([3, 0])
    q, k = torch.randn(2, 2, 8), torch.randn(2, 1, 8)
    expected = rope.forward(positions, q, k)
    try:
        with pytest.raises(AssertionError, match="RoPE 表在 cpu 上，q 在 meta 上"):
            rope.forward(positions.to("meta"), q.to("meta"), k.to("meta"))
        assert rope._cos.device.type == "cpu"  # 前向没有顺手搬
        rope_tables_to("meta")
        assert {r._cos.device.type for r in (rope, other)} == {"meta"}
        assert {r._sin.device.type for r in (rope, other)} == {"meta"}
        out_q, out_k = rope.forward(positions.to("meta"), q.to("meta"), k.to("meta"))
        assert out_q.shape == q.shape and out_k.shape == k.shape
    finally:  # meta 上的表没有数据，搬不回来：换回原来的 CPU 表
        for key, (cos, sin) in saved.items():
            rotary._ROPES[key]._cos, rotary._ROPES[key]._sin = cos, sin
    got = rope.forward(positions, q, k)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


# ---------------------------------------------------------------- 激活

def test_silu_and_mul():
    x = torch.randn(3, 5, 8)
    torch.testing.assert_close(silu_and_mul(x), F.silu(x[..., :4]) * x[..., 4:])
    with pytest.raises(AssertionError):
        silu_and_mul(torch.randn(2, 7))


# ---------------------------------------------------------------- 线性层：模拟 TP

TP_SIZES = [1, 2, 4]


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tp", TP_SIZES)
def test_linear_replicated_is_the_same_everywhere(tp):
    w, b, x = randn(12, 8, seed=0), randn(12, seed=1), randn(5, 8, seed=2)
    layers = build_ranks(tp, lambda: LinearReplicated(8, 12, has_bias=True),
                         {"weight": lambda r, s: w, "bias": lambda r, s: b})
    for layer in layers:
        assert layer.weight.shape == (12, 8)
        close(layer.forward(x), x @ w.T + b)


@pytest.mark.parametrize("tp", TP_SIZES)
@pytest.mark.parametrize("has_bias", [False, True])
def test_col_parallel_merged_pieces_concatenate_to_full_output(tp, has_bias):
    gate, up, x = randn(16, 8, seed=0), randn(16, 8, seed=1), randn(5, 8, seed=2)
    bg, bu = randn(16, seed=3), randn(16, seed=4)
    load = {"weight": lambda r, s: torch.cat([rows(gate, r, s), rows(up, r, s)])}
    if has_bias:
        load["bias"] = lambda r, s: torch.cat([rows(bg, r, s), rows(bu, r, s)])
    layers = build_ranks(tp, lambda: LinearColParallelMerged(8, [16, 16], has_bias=has_bias), load)
    full_gate = x @ gate.T + (bg if has_bias else 0)
    full_up = x @ up.T + (bu if has_bias else 0)
    outs = [layer.forward(x) for layer in layers]  # 列并行不通信，各 rank 独立算
    assert all(o.shape == (5, 2 * 16 // tp) for o in outs)
    assert layers[0].local_out_features == [16 // tp, 16 // tp]
    gates, ups = zip(*(o.split(16 // tp, dim=-1) for o in outs))
    close(torch.cat(gates, dim=-1), full_gate)
    close(torch.cat(ups, dim=-1), full_up)
    # 列并行之后直接逐元素激活：每个 rank 拿到的正好是完整激活的一段
    acts = torch.cat([silu_and_mul(o) for o in outs], dim=-1)
    close(acts, F.silu(full_gate) * full_up)


def test_col_parallel_merged_requires_even_split():
    set_tp_info(0, 3)
    with pytest.raises(ValueError):
        LinearColParallelMerged(8, [16, 16])


@pytest.mark.parametrize("tp", TP_SIZES)
@pytest.mark.parametrize("has_bias", [False, True])
def test_row_parallel_partial_sums_add_up(tp, has_bias):
    w, b, x = randn(6, 16, seed=0), randn(6, seed=1), randn(5, 16, seed=2)
    full = x @ w.T + (b if has_bias else 0)
    load = {"weight": lambda r, s: cols(w, r, s)}
    if has_bias:
        load["bias"] = lambda r, s: b  # bias 每个 rank 都存一份，但只在求和之后加一次
    for cls in (LinearRowParallel, LinearOProj):
        comm = install_comm(tp)
        layers = build_ranks(tp, lambda cls=cls: cls(16, 6, has_bias=has_bias), load)
        assert layers[0].weight.shape == (6, 16 // tp)
        outs = comm.run(lambda r, layers=layers: layers[r].forward(cols(x, r, tp)))
        for out in outs:
            close(out, full, atol=1e-4)
        if tp == 1:
            assert comm.sent == [[]]  # 单卡不通信
            continue
        partials = [sent[0][1] for sent in comm.sent]
        assert all(len(sent) == 1 and sent[0][0] == "all_reduce" for sent in comm.sent)
        for p in partials:
            assert (p - (full - (b if has_bias else 0))).abs().max() > 0.1  # 单看一份不是结果
        close(sum(partials) + (b if has_bias else 0), full, atol=1e-4)


def test_layers_do_not_communicate_on_one_rank():
    DistributedCommunicator.plugins.append(ForbiddenComm())
    x = randn(3, 8, seed=0)
    row = LinearRowParallel(8, 4)
    row.weight = randn(4, 8, seed=1)
    close(row.forward(x), x @ row.weight.T)
    emb = VocabParallelEmbedding(10, 8)
    emb.weight = randn(10, 8, seed=2)
    ids = torch.tensor([1, 9, 0], dtype=torch.int32)
    assert torch.equal(emb.forward(ids), emb.weight[ids.long()])
    ctx = Context(page_size=1)
    set_global_ctx(ctx)
    head = ParallelLMHead(10, 8, tied_embedding=emb)
    with ctx.forward_batch(make_batch([3])):
        close(head.forward(x), x[[2]] @ emb.weight.T)


# ---------------------------------------------------------------- LinearQKVMerged 与 GQA

def gqa_attention(q, k, v):
    """完整的参照：q [T, Hq, d]，k/v [T, Hkv, d]，因果注意力，输出 [T, Hq, d]。"""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    o = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                       is_causal=True)
    return o.transpose(0, 1)


@pytest.mark.parametrize("num_q, num_kv, tp", [(4, 2, 1), (4, 2, 2), (8, 4, 4), (16, 8, 16), (8, 2, 4),
                                                (8, 1, 2)])
def test_qkv_merged_heads_pair_with_the_right_kv_head(num_q, num_kv, tp):
    d, hidden, T = 4, 12, 6
    wq, wk, wv = randn(num_q * d, hidden, seed=0), randn(num_kv * d, hidden, seed=1), randn(num_kv * d, hidden, seed=2)
    x = randn(T, hidden, seed=3)
    local_q = num_q // tp
    local_kv = max(num_kv // tp, 1)

    def first_kv(rank):
        # 本 rank 的 q 头是 [rank*local_q, ...)，它们在完整模型里用的 KV 头是 q 头号 // group
        return rank * local_q // (num_q // num_kv)

    def cut(rank, size):
        return torch.cat([heads(wq, rank * local_q, local_q, d),
                          heads(wk, first_kv(rank), local_kv, d),
                          heads(wv, first_kv(rank), local_kv, d)])

    layers = build_ranks(tp, lambda: LinearQKVMerged(hidden, d, num_q, num_kv), {"weight": cut})
    assert layers[0].weight.shape == ((local_q + 2 * local_kv) * d, hidden)
    assert (layers[0].local_qo_heads, layers[0].local_kv_heads) == (local_q, local_kv)

    full = gqa_attention((x @ wq.T).view(T, num_q, d), (x @ wk.T).view(T, num_kv, d),
                         (x @ wv.T).view(T, num_kv, d))
    for rank, layer in enumerate(layers):
        q, k, v = layer.forward(x).split([local_q * d, local_kv * d, local_kv * d], dim=-1)
        local = gqa_attention(q.view(T, local_q, d), k.view(T, local_kv, d), v.view(T, local_kv, d))
        close(local, full[:, rank * local_q : (rank + 1) * local_q], atol=1e-4)


def test_qkv_merged_kv_replication_check():
    set_tp_info(0, 16)
    layer = LinearQKVMerged(12, 4, 16, 8)  # 8 个 KV 头、16 个 rank：每个 rank 1 个
    assert (layer.local_qo_heads, layer.local_kv_heads) == (1, 1)
    set_tp_info(0, 3)
    with pytest.raises(ValueError):
        LinearQKVMerged(12, 4, 16, 8)  # 16 个 q 头切不成 3 份
    set_tp_info(0, 8)
    with pytest.raises(ValueError):
        LinearQKVMerged(12, 4, 24, 3)  # 3 个 KV 头不能平均复制到 8 个 rank


# ---------------------------------------------------------------- 词表并行

def vocab_cut(w: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    per = -(-w.shape[0] // size)
    piece = w[rank * per : (rank + 1) * per]
    return torch.cat([piece, w.new_zeros(per - piece.shape[0], w.shape[1])])


@pytest.mark.parametrize("vocab, tp", [(10, 1), (10, 2), (10, 4), (11, 4), (13, 2)])
def test_vocab_parallel_embedding_masks_foreign_ids(vocab, tp):
    w = randn(vocab, 6, seed=0)
    ids = torch.tensor([0, vocab - 1, 3, 3, vocab // 2, 1], dtype=torch.int32)
    comm = install_comm(tp)
    layers = build_ranks(tp, lambda: VocabParallelEmbedding(vocab, 6), {"weight": lambda r, s: vocab_cut(w, r, s)})
    per = -(-vocab // tp)
    assert all(layer.weight.shape == (per, 6) for layer in layers)
    outs = comm.run(lambda r: layers[r].forward(ids))
    for out in outs:
        assert torch.equal(out, w[ids.long()])
    if tp == 1:
        return
    owners = torch.zeros(len(ids), dtype=torch.long)
    for rank, sent in enumerate(comm.sent):
        (op, contrib), = sent
        mine = (ids >= rank * per) & (ids < (rank + 1) * per)
        assert op == "all_reduce"
        assert torch.equal(contrib[mine], w[ids[mine].long()])
        assert torch.all(contrib[~mine] == 0)  # 不归本 rank 的 id：整行 0
        owners += mine.long()
    assert torch.all(owners == 1)  # 每个 id 恰好一个 rank 负责


@pytest.mark.parametrize("vocab, tp", [(10, 1), (10, 2), (11, 4), (13, 2), (9, 4)])
@pytest.mark.parametrize("tied", [False, True])
def test_parallel_lm_head_gathers_vocab_slices(vocab, tp, tied):
    w = randn(vocab, 6, seed=1)
    comm = install_comm(tp)
    load = {"weight": lambda r, s: vocab_cut(w, r, s)}

    def make():
        if tied:
            emb = VocabParallelEmbedding(vocab, 6)
            emb.load_state_dict(load_for_current_rank(load))
            return ParallelLMHead(vocab, 6, tied_embedding=emb)
        head = ParallelLMHead(vocab, 6)
        head.load_state_dict(load_for_current_rank(load))
        return head

    heads_ = build_ranks(tp, make)
    if tied:
        assert heads_[0].state_dict() == {}  # 共享权重不属于 LM head
    batch = make_batch([3, 1, 2])
    x = randn(6, 6, seed=2)
    ctx = Context(page_size=1)
    set_global_ctx(ctx)
    with ctx.forward_batch(batch):
        outs = comm.run(lambda r: heads_[r].forward(x))
    full = x[[2, 3, 5]] @ w.T
    for out in outs:
        assert out.shape == (3, vocab) and out.dtype == torch.float32
        close(out, full, atol=1e-5)
    if tp > 1:
        assert all(len(s) == 1 and s[0][0] == "all_gather" and s[0][1].shape == (3, -(-vocab // tp))
                   for s in comm.sent)


def load_for_current_rank(load: dict) -> dict:
    info = get_tp_info()
    return {name: cut(info.rank, info.size) for name, cut in load.items()}


def test_lm_head_keeps_last_token_per_request_in_prefill_and_all_rows_in_decode():
    w = randn(7, 4, seed=0)
    head = ParallelLMHead(7, 4)
    head.weight = w
    ctx = Context(page_size=1)
    set_global_ctx(ctx)
    x = randn(9, 4, seed=1)
    # prefill：请求 1 命中了 5 个 token 的前缀缓存，这一步只算 2 个
    batch = make_batch([3, 2, 4], cached=[0, 5, 0])
    with ctx.forward_batch(batch):
        out = head.forward(x)
    close(out, x[[2, 4, 8]] @ w.T)
    x = randn(3, 4, seed=2)
    with ctx.forward_batch(make_batch([1, 1, 1], phase="decode", cached=[4, 9, 2])):
        out = head.forward(x)
    close(out, x @ w.T)


def test_lm_head_rows_on_cuda_use_pinned_memory(monkeypatch):
    """GPU 上行号经锁页内存、non_blocking 拷过去；没有 CUDA 就跳过。"""
    if not torch.cuda.is_available():
        pytest.skip("没有 CUDA：锁页内存 + non_blocking 的路径只在 GPU 上走")
    import minisgl.layers.embedding as embedding
    pinned = []
    real_pin = torch.Tensor.pin_memory

    def spy(self, *args, **kwargs):
        pinned.append(self.numel())
        return real_pin(self, *args, **kwargs)

    head = ParallelLMHead(7, 4)
    head.weight = randn(7, 4, seed=0).cuda()
    ctx = Context(page_size=1)
    set_global_ctx(ctx)
    x = randn(9, 4, seed=1).cuda()
    batch = make_batch([3, 2, 4], cached=[0, 5, 0])
    monkeypatch.setattr(torch.Tensor, "pin_memory", spy)
    with ctx.forward_batch(batch):
        out = head.forward(x)
    monkeypatch.undo()
    assert pinned == [3]  # 3 个请求的行号经锁页内存上 GPU
    close(out.cpu(), (x[[2, 4, 8]] @ head.weight.T).cpu())


# ---------------------------------------------------------------- 注意力层

class RecordingBackend:
    def __init__(self) -> None:
        self.calls: list = []

    def forward(self, q, k, v, layer_id, batch):
        self.calls.append((q.clone(), k.clone(), v.clone(), layer_id, batch))
        group = q.shape[1] // k.shape[1]
        return v.repeat_interleave(group, dim=1) * 2  # 形状对的任意函数


@pytest.mark.parametrize("with_norm", [False, True])
@pytest.mark.parametrize("tp", [1, 2])
def test_attention_layer_splits_norms_then_ropes(with_norm, tp):
    hq, hkv, d = 4, 2, 8
    set_tp_info(tp - 1, tp)  # 最后一个 rank 的视角：本地头数减半
    lq, lkv = hq // tp, hkv // tp
    rope = RotaryEmbedding(d, d, 64, 10000.0)
    q_norm = k_norm = None
    if with_norm:
        q_norm, k_norm = RMSNorm(d, 1e-6), RMSNorm(d, 1e-6)
        q_norm.weight = 1 + randn(d, seed=0)  # 不均匀的权重：先归一化还是先旋转，结果不同
        k_norm.weight = 1 + randn(d, seed=1)
    layer = AttentionLayer(3, hq, hkv, d, rope, q_norm, k_norm)
    set_tp_info(0, 1)
    assert (layer.local_qo_heads, layer.local_kv_heads) == (lq, lkv)
    assert set(layer.state_dict()) == ({"q_norm.weight", "k_norm.weight"} if with_norm else set())
    backend = RecordingBackend()
    ctx = Context(page_size=1)
    ctx.attn_backend = backend
    set_global_ctx(ctx)
    batch = make_batch([3, 2], cached=[0, 6])
    qkv = randn(5, (lq + 2 * lkv) * d, seed=2)
    with ctx.forward_batch(batch):
        out = layer.forward(qkv)
    (q, k, v, layer_id, seen), = backend.calls
    assert layer_id == 3 and seen is batch
    assert q.shape == (5, lq, d) and k.shape == v.shape == (5, lkv, d)
    assert out.shape == (5, lq * d)
    raw_q, raw_k, raw_v = qkv.split([lq * d, lkv * d, lkv * d], dim=-1)
    raw_q, raw_k, raw_v = raw_q.view(5, lq, d), raw_k.view(5, lkv, d), raw_v.view(5, lkv, d)
    if with_norm:
        raw_q, raw_k = q_norm.forward(raw_q), k_norm.forward(raw_k)
    exp_q, exp_k = rope.forward(batch.positions, raw_q, raw_k)
    close(q, exp_q)
    close(k, exp_k)
    assert torch.equal(v, raw_v)  # v 不归一化、不旋转
    close(out, (raw_v.repeat_interleave(lq // lkv, dim=1) * 2).reshape(5, lq * d))
    if with_norm:  # 顺序反过来（先 RoPE 再归一化）就对不上：这个测试分得出两种顺序
        plain_q = qkv[:, : lq * d].reshape(5, lq, d)
        plain_k = qkv[:, lq * d : (lq + lkv) * d].reshape(5, lkv, d)
        rotated_q, _ = rope.forward(batch.positions, plain_q, plain_k)
        assert (q_norm.forward(rotated_q) - q).abs().max() > 1e-3
