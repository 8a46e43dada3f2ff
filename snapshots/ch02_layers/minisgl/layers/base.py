"""BaseOP：比 nn.Module 轻得多的"层"基类。

推理用不到 autograd、hook、train/eval 切换，nn.Module 的那套机器只剩开销。我们只需要两件事：

1. 按名字导出、导入权重（state_dict / load_state_dict）——名字要和 Hugging Face 的对得上；
2. 在 meta 设备上先把模型"搭个架子"，再把真权重一块块换进去。

所以 BaseOP 的规则很简单：权重就是普通属性（torch.Tensor），子层就是普通属性（BaseOP），
名字以下划线开头的属性不算权重（用来放缓存、通信器之类）。state_dict 按属性名一层层拼出
"model.layers.0.mlp.down_proj.weight" 这样的键。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator

import torch


class BaseOP(ABC):
    """所有层的基类：权重是张量属性，子层是 BaseOP 属性。"""

    @abstractmethod
    def forward(self, *args: Any, **kwargs: Any) -> Any: ...

    def named_children(self) -> Iterator[tuple[str, BaseOP | torch.Tensor]]:
        """按定义顺序列出权重和子层；下划线开头的属性是内部状态，跳过。"""
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (torch.Tensor, BaseOP)):
                yield name, value

    def state_dict(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """{完整权重名: 张量}，例如 {"model.norm.weight": ...}。"""
        result: dict[str, torch.Tensor] = {}
        for name, value in self.named_children():
            if isinstance(value, torch.Tensor):
                result[prefix + name] = value
            else:
                result.update(value.state_dict(prefix + name + "."))
        return result

    def load_state_dict(self, state: dict[str, torch.Tensor], *, prefix: str = "") -> None:
        """用 state 里的张量**替换**同名权重（不是拷贝进去）。

        替换而不是 copy_：在 meta 设备上搭的架子没有真内存，只能整个换掉。
        形状、dtype 必须一致；少了或多了权重都报错，并列出是哪些。
        """
        expected = self.state_dict(prefix)
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        if missing or unexpected:
            raise ValueError(
                f"权重名对不上：缺少 {_preview(missing)}，多出 {_preview(unexpected)}"
            )
        for key, old in expected.items():
            new = state[key]
            if new.shape != old.shape or new.dtype != old.dtype:
                raise ValueError(
                    f"权重 {key} 应为 {tuple(old.shape)} {old.dtype}，"
                    f"收到 {tuple(new.shape)} {new.dtype}"
                )
        for key, new in state.items():
            self._assign(key[len(prefix):], new)

    def _assign(self, dotted: str, tensor: torch.Tensor) -> None:
        """dotted 是相对本层的名字，例如 "layers.0.mlp.down_proj.weight"：逐级找到子层再赋值。"""
        head, _, rest = dotted.partition(".")
        if rest:
            self._child(head)._assign(rest, tensor)
        else:
            setattr(self, head, tensor)

    def _child(self, name: str) -> BaseOP:
        return getattr(self, name)


class OPList(BaseOP):
    """若干个同类子层，名字是 "0"、"1"……，对应 HF 的 model.layers.0、model.layers.1。"""

    def __init__(self, ops: list[BaseOP]) -> None:
        self.ops = list(ops)

    def named_children(self) -> Iterator[tuple[str, BaseOP | torch.Tensor]]:
        for i, op in enumerate(self.ops):
            yield str(i), op

    def _child(self, name: str) -> BaseOP:
        return self.ops[int(name)]

    def __getitem__(self, i: int) -> BaseOP:
        return self.ops[i]

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[BaseOP]:
        return iter(self.ops)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("OPList 只是容器，由外层按顺序调用其中的层")


def _preview(keys: list[str], limit: int = 5) -> str:
    if not keys:
        return "无"
    more = f" 等 {len(keys)} 个" if len(keys) > limit else ""
    return "、".join(keys[:limit]) + more
