"""采样器：从每个请求最后一个位置的 logits 里挑出下一个 token。

一批里的请求各有各的采样参数：有的贪心，有的 temperature=0.7、top_p=0.9。
先把它们整理成几列张量（prepare），再对整批一次算完（sample），不逐个请求循环。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minisgl.core import Batch
from minisgl.utils import to_device


@dataclass
class BatchSamplingArgs:
    """一批请求的采样参数，每个张量一行对应一个请求。all_greedy 时其余字段都是 None。"""

    all_greedy: bool
    greedy: torch.Tensor | None = None  # bool [B]：这一行直接取 argmax
    temperatures: torch.Tensor | None = None  # float [B]，贪心行填 1（不会用到）
    top_k: torch.Tensor | None = None  # int [B]，不限制时填词表大小
    top_p: torch.Tensor | None = None  # float [B]


class Sampler:
    def __init__(self, device: torch.device, vocab_size: int, seed: int = 0) -> None:
        self.device, self.vocab_size = device, vocab_size
        # 自己的随机数发生器：采样结果只取决于种子和调用顺序，不受别处 torch.manual_seed 影响
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def prepare(self, batch: Batch) -> BatchSamplingArgs:
        params = [req.sampling_params for req in batch.reqs]
        if all(p.is_greedy for p in params):
            return BatchSamplingArgs(all_greedy=True)  # 最常见的情况：整批 argmax，什么都不用准备
        def column(values: list, dtype: torch.dtype) -> torch.Tensor:  # GPU 上异步拷，CPU 不等
            return to_device(values, dtype, self.device)

        return BatchSamplingArgs(
            all_greedy=False,
            greedy=column([p.is_greedy for p in params], torch.bool),
            temperatures=column([1.0 if p.is_greedy else p.temperature for p in params],
                                torch.float32),
            top_k=column([self.vocab_size if p.top_k == -1 else min(p.top_k, self.vocab_size)
                          for p in params], torch.int64),
            top_p=column([p.top_p for p in params], torch.float32),
        )

    def sample(self, logits: torch.Tensor, args: BatchSamplingArgs) -> torch.Tensor:
        """logits: [B, vocab] → 下一个 token，int32 [B]。"""
        if args.all_greedy:
            return logits.argmax(dim=-1).to(torch.int32)
        assert args.temperatures is not None and args.top_k is not None and args.top_p is not None
        # 降序排一次，top-k 和 top-p 都在排好的序列上做
        # stable=True：并列的 token 按 id 从小到大排，同样的输入总是同样的结果
        scaled = logits.float() / args.temperatures[:, None]
        sorted_logits, order = scaled.sort(dim=-1, descending=True, stable=True)
        rank = torch.arange(logits.shape[-1], device=logits.device)
        # 只留前 k 名
        sorted_logits.masked_fill_(rank[None, :] >= args.top_k[:, None], float("-inf"))
        probs = sorted_logits.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # 排在这个 token 前面的概率总和
        # 前面已经凑够 p 了，这个 token 不要；第 1 名前面是 0，总能留下。
        # top_p = 1 表示不限制：浮点累加可能在末尾"凑够 1"，不能因此误删长尾
        probs.masked_fill_((mass_before >= args.top_p[:, None]) & (args.top_p[:, None] < 1.0), 0.0)
        # 按 probs 的比例抽一个名次（不必归一化）：argmax(p / q)，q 服从指数分布。
        # 与 torch.multinomial(probs, 1) 同一个算法、同样的随机数，但 multinomial 先把
        # "分布是否合法"读回 CPU 检查，在 GPU 上是一次同步；这里什么都不读回
        q = torch.empty_like(probs).exponential_(generator=self.generator)
        choice = (probs / q).argmax(dim=-1, keepdim=True)
        sampled = order.gather(-1, choice).squeeze(-1)
        return torch.where(args.greedy, logits.argmax(dim=-1), sampled).to(torch.int32)
