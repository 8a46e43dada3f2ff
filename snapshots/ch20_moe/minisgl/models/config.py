"""ModelConfig：从 Hugging Face 的 config.json 里挑出引擎需要的那几个数。

config.json 里字段很多、不同模型写法不一（有的没有 head_dim，有的 KV 头数缺省等于 query 头数）。
在这里统一成一份扁平的、名字固定的配置，模型、KV 池、TP 切分都只读它。
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # 例如 "LlamaForCausalLM"、"Qwen3ForCausalLM"，决定用哪个模型类
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool = False  # q/k/v/o 四个投影带不带 bias（HF 的 Llama/Qwen3 共用这一个开关）
    # MoE（Qwen3-MoE 的字段名）：num_experts = 0 表示稠密模型
    num_experts: int = 0
    num_experts_per_tok: int = 0  # 每个 token 选几个专家（top-k）
    moe_intermediate_size: int = 0  # 每个专家的中间维
    norm_topk_prob: bool = True  # 选出的 k 个权重要不要再归一化到和为 1
    decoder_sparse_step: int = 1  # 每隔几层一个 MoE 层
    mlp_only_layers: tuple[int, ...] = ()  # 这些层用稠密 MLP（intermediate_size）

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, layer_id: int) -> bool:
        """第 layer_id 层的 MLP 是不是 MoE：规则和 HF 的 Qwen3-MoE 一样。"""
        return (self.is_moe and layer_id not in self.mlp_only_layers
                and (layer_id + 1) % self.decoder_sparse_step == 0)

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> ModelConfig:
        """从 config.json 解析出的字典构造。缺字段、或写着引擎没实现的东西，都报错说清楚。"""
        try:
            architecture = hf["architectures"][0]
            num_heads = hf["num_attention_heads"]
            config = cls(
                architecture=architecture,
                num_layers=hf["num_hidden_layers"],
                hidden_size=hf["hidden_size"],
                intermediate_size=hf["intermediate_size"],
                num_qo_heads=num_heads,
                num_kv_heads=hf.get("num_key_value_heads") or num_heads,  # 缺省：没有 GQA
                head_dim=hf.get("head_dim") or hf["hidden_size"] // num_heads,
                vocab_size=hf["vocab_size"],
                rms_norm_eps=float(hf["rms_norm_eps"]),
                rope_theta=_rope_theta(hf),
                max_position_embeddings=hf["max_position_embeddings"],
                tie_word_embeddings=hf.get("tie_word_embeddings", False),
                attention_bias=hf.get("attention_bias", False),
                **_moe_fields(hf),
            )
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"config.json 缺少必需的字段：{e}") from None
        config.check_moe()
        act = hf.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"暂不支持 hidden_act={act!r}：本书的 MLP 只实现了 silu（silu_and_mul）")
        return config

    def check_moe(self) -> None:
        """MoE 的几个数自洽吗？不自洽时抛 ValueError，说清是哪个数。"""
        if not self.is_moe:
            return
        if not 1 <= self.num_experts_per_tok <= self.num_experts:
            raise ValueError(f"num_experts_per_tok 要在 1 和 num_experts（{self.num_experts}）之间，"
                             f"收到 {self.num_experts_per_tok}")
        if self.moe_intermediate_size < 1 or self.decoder_sparse_step < 1:
            raise ValueError("moe_intermediate_size 和 decoder_sparse_step 都要 ≥ 1，收到 "
                             f"{self.moe_intermediate_size} 和 {self.decoder_sparse_step}")

    @classmethod
    def from_json(cls, path: str | Path) -> ModelConfig:
        """path 可以是 config.json 本身，也可以是模型目录。"""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"找不到模型配置 {path}")
        return cls.from_hf(json.loads(path.read_text(encoding="utf-8")))


def _moe_fields(hf: dict[str, Any]) -> dict[str, Any]:
    """Qwen3-MoE 的几个字段；没有 num_experts（或为 0）就是稠密模型，什么都不取。"""
    if not hf.get("num_experts"):
        return {}
    return dict(num_experts=hf["num_experts"], num_experts_per_tok=hf["num_experts_per_tok"],
                moe_intermediate_size=hf["moe_intermediate_size"],
                norm_topk_prob=hf.get("norm_topk_prob", True),
                decoder_sparse_step=hf.get("decoder_sparse_step", 1),
                mlp_only_layers=tuple(hf.get("mlp_only_layers") or ()))


def _rope_theta(hf: dict[str, Any]) -> float:
    """RoPE 的底数。transformers 4 写在顶层 rope_theta，缩放写在 rope_scaling；
    transformers 5 把两者都放进 rope_parameters。两种都认；带缩放的一律拒绝，不悄悄忽略。"""
    theta = hf.get("rope_theta")
    for key in ("rope_scaling", "rope_parameters"):
        rope = hf.get(key) or {}
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind != "default":
            raise ValueError(f"暂不支持 {key} 里的 RoPE 缩放 {kind!r}：本书只实现标准 RoPE，"
                             "照常加载会在长提示上悄悄算错")
        theta = rope.get("rope_theta") or theta
    return float(theta or 10000.0)  # json 里常写成整数 1000000
