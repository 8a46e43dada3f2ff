"""流式加载 safetensors 权重：只读本 rank 的那一份、合并、交出去，再读下一个。

不先把整个文件读进内存：Qwen3-0.6B 的权重有 1.2 GB（bf16），TP=8 时每个 rank 只需要八分之一。
safetensors 可以按名字取一个张量的"切片句柄"（get_slice），只读出切片里那几行、几列，
所以每个 rank 从文件里读出的正好是自己那一份，连一个完整张量都不必拿在手里。

两个步骤的顺序有讲究：**先切、再合并**。q/k/v 按头切，切完每个 rank 把自己的 q、k、v 三段
拼成 qkv_proj；若先合并再切，切出来的就是"一部分 q 头 + 另一部分 k 头"的错位组合。

MoE 模型的文件里每个专家各存一份（mlp.experts.7.gate_proj.weight……）：每个专家照样先切、再合并出
gate_up_proj，最后把本 rank 的专家按编号叠成一个三维张量 mlp.experts.gate_up_proj [本地专家数, ...]。
专家并行时，不归本 rank 的专家根本不从文件里读。
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import torch
from safetensors import safe_open

from minisgl.distributed import get_ep_info, get_tp_info, local_kv_heads
from minisgl.utils import div_ceil

from .config import ModelConfig

# 合并规则：HF 的几个投影 → 我们的一个层，按列表顺序拼接
_MERGED = {
    "q_proj": ("qkv_proj", 0), "k_proj": ("qkv_proj", 1), "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", 1),
}
_GROUP_SIZE = {"qkv_proj": 3, "gate_up_proj": 2}

_SPLIT_ROWS = ("q_proj", "gate_proj", "up_proj")  # 列并行：按输出维（第 0 维）切
_SPLIT_KV = ("k_proj", "v_proj")  # 按 KV 头切，头不够分时复制
_SPLIT_COLS = ("o_proj", "down_proj")  # 行并行：按输入维（第 1 维）切
_SPLIT_VOCAB = ("embed_tokens", "lm_head")  # 按词表切，不整除时补零行

# 一个专家的一个投影：(前缀 model.layers.3.mlp.experts)(专家编号)(投影名)
_EXPERT_KEY = re.compile(r"^(?P<prefix>.+\.experts)\.(?P<index>\d+)\.(?P<proj>\w+)\.weight$")

Sliceable = Any  # safetensors 的切片句柄（PySafeSlice）：get_shape()，按下标切出张量


def _module_name(key: str) -> str:
    """"model.layers.0.self_attn.q_proj.weight" → "q_proj"。"""
    parts = key.split(".")
    return parts[-2] if len(parts) >= 2 else key


def shard_tensor(
    key: str, value: torch.Tensor | Sliceable, rank: int, size: int, num_kv_heads: int
) -> torch.Tensor:
    """从完整张量 value 里取出第 rank 个（共 size 个）rank 该存的那一份。规则由权重名决定。

    value 可以是张量，也可以是 safetensors 的切片句柄（get_slice）：两者都支持 value[a:b]、
    value[:, a:b]，句柄只把切到的那部分从文件里读出来。
    """
    module = _module_name(key)
    shape = _shape(value)
    if size == 1:
        return value[:]  # 不切：原样交出，不拷贝（CPU 上就是文件的内存映射）
    if module in _SPLIT_ROWS:
        _check(key, shape[0], size)
        rows = shape[0] // size
        return _own(value[rank * rows : (rank + 1) * rows])
    if module in _SPLIT_KV:
        head_dim = shape[0] // num_kv_heads
        local = local_kv_heads(num_kv_heads, size)
        if num_kv_heads >= size:
            first = rank * local
        else:  # 复制：连续 size // num_kv_heads 个 rank 共用一个头
            first = rank // (size // num_kv_heads)
        return _own(value[first * head_dim : (first + local) * head_dim])
    if module in _SPLIT_COLS and len(shape) == 2:
        _check(key, shape[1], size)
        cols = shape[1] // size
        return _own(value[:, rank * cols : (rank + 1) * cols])
    if module in _SPLIT_VOCAB:
        rows = div_ceil(shape[0], size)
        piece = value[rank * rows : min((rank + 1) * rows, shape[0])]
        if piece.shape[0] < rows:  # 最后一个 rank：补零行，和其他 rank 一样高
            pad = piece.new_zeros(rows - piece.shape[0], *piece.shape[1:])
            piece = torch.cat([piece, pad], dim=0)
        return _own(piece)
    return value[:]  # 归一化层的权重、行并行层的 bias 等：每个 rank 都存完整的一份，不拷贝


def _shape(value: torch.Tensor | Sliceable) -> list[int]:
    return list(value.shape) if isinstance(value, torch.Tensor) else value.get_shape()


def _own(piece: torch.Tensor) -> torch.Tensor:
    """把切片拷成一块独立的连续内存。

    切片（哪怕已经连续，比如按行切的前一半）只是完整张量的一个视图：把它交出去，
    完整张量的存储就跟着它一直活着。safetensors 在 CPU 上读出的张量是文件的内存映射，
    这时留下的是整段映射；换成会把张量拷出来的读法（直接读到 GPU 上、旧版本的库），
    就是实打实多占一整个完整张量。拷一份，交出去的权重只占自己那么大，也和文件脱了钩。
    """
    return piece.clone(memory_format=torch.contiguous_format)


def _check(key: str, n: int, size: int) -> None:
    if n % size != 0:
        raise ValueError(f"权重 {key} 的第 0/1 维大小 {n} 不能被 TP 数 {size} 整除")


def load_weight(
    model_path: str | Path,
    config: ModelConfig,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Iterator[tuple[str, torch.Tensor]]:
    """逐个产出 (我们的权重名, 本 rank 的张量)，已切分、已合并、已转好 dtype 和设备。

    本 rank 是谁从 get_tp_info() / get_ep_info() 读，和建层时读的是同一处：切出来的形状必然和层对得上。
    """
    weights = _read_and_merge(Path(model_path), config, device, dtype)
    return _stack_experts(weights, config) if config.is_moe else weights


def _read_and_merge(model_path: Path, config: ModelConfig, device: torch.device | str,
                    dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    tp, ep = get_tp_info(), get_ep_info()
    files = sorted(model_path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_path} 里没有 .safetensors 权重文件")
    pending: dict[str, dict[int, torch.Tensor]] = {}  # 合并到一半的组：组名 → {序号: 张量}
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            for key in f.keys():
                if key == "lm_head.weight" and config.tie_word_embeddings:
                    continue  # 共享嵌入：LM head 直接用 embed_tokens，文件里这一份是多余的
                if "rotary_emb" in key:
                    continue  # 有些导出会带上 RoPE 的缓存表，我们自己算
                rank, size = tp.rank, tp.size
                if (expert := _EXPERT_KEY.match(key)) is not None and ep.size > 1:
                    if _local_expert(int(expert["index"]), config) is None:
                        continue  # 专家并行：别的 rank 的专家，不读
                    rank, size = 0, 1  # 本 rank 的专家整个放下，不切
                # get_slice 不读数据，shard_tensor 切下标时才从文件里读出本 rank 的那一份
                tensor = shard_tensor(key, f.get_slice(key), rank, size, config.num_kv_heads)
                tensor = tensor.to(device=device, dtype=dtype)
                module = _module_name(key)
                if module not in _MERGED:
                    yield key, tensor
                    continue
                merged, index = _MERGED[module]
                group = key.replace(f".{module}.", f".{merged}.")
                parts = pending.setdefault(group, {})
                parts[index] = tensor
                if len(parts) == _GROUP_SIZE[merged]:  # 凑齐了：按 q,k,v / gate,up 的顺序拼
                    del pending[group]
                    yield group, torch.cat([parts[i] for i in range(len(parts))], dim=0)
    if pending:
        raise ValueError(f"这些权重没有凑齐，无法合并：{'、'.join(sorted(pending))}")


def _local_expert(index: int, config: ModelConfig) -> int | None:
    """全局第 index 个专家在本 rank 上是第几个；不归本 rank 时返回 None。"""
    ep = get_ep_info()
    per_rank = config.num_experts // ep.size
    local = index - ep.rank * per_rank
    return local if 0 <= local < per_rank else None


def _stack_experts(weights: Iterator[tuple[str, torch.Tensor]], config: ModelConfig
                   ) -> Iterator[tuple[str, torch.Tensor]]:
    """把 ...experts.<编号>.gate_up_proj.weight 这样一个专家一个的张量，按编号叠成 ...experts.gate_up_proj。"""
    per_rank = config.num_experts // get_ep_info().size
    pending: dict[str, dict[int, torch.Tensor]] = {}  # 叠到一半的：叠好后的名字 → {本地编号: 张量}
    for key, tensor in weights:
        expert = _EXPERT_KEY.match(key)
        if expert is None:
            yield key, tensor
            continue
        local = _local_expert(int(expert["index"]), config)
        assert local is not None, key  # 不归本 rank 的专家在读文件时就跳过了
        name = f"{expert['prefix']}.{expert['proj']}"
        group = pending.setdefault(name, {})
        group[local] = tensor
        if len(group) == per_rank:
            del pending[name]
            yield name, torch.stack([group[i] for i in range(per_rank)])
    if pending:
        raise ValueError(f"这些专家权重不全：{'、'.join(sorted(pending))}")
