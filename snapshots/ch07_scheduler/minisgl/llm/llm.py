"""LLM：离线批量生成。交给它一组提示，它把请求全部排进调度器，一步步跑到全部结束。

    llm = LLM("path/to/model", max_running_req=8)
    outs = llm.generate(["你好", [1, 2, 3]], SamplingParams(max_tokens=32))
    outs[0]["text"], outs[0]["token_ids"]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

import torch

from minisgl.core import SamplingParams
from minisgl.scheduler import Scheduler, SchedulerConfig

_FIELDS = {f.name for f in dataclasses.fields(SchedulerConfig)} - {"model_path", "offline_mode"}


class LLM(Scheduler):
    def __init__(self, model_path: str | Path, **config_fields) -> None:
        unknown = sorted(set(config_fields) - _FIELDS)
        if unknown:
            raise TypeError(f"LLM 不认识这些参数：{unknown}；可用的有 {sorted(_FIELDS)}")
        super().__init__(SchedulerConfig(model_path=model_path, offline_mode=True, **config_fields))
        self.next_uid = 0

    def generate(
        self,
        prompts: Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[dict]:
        """每个提示生成一段，按提示的顺序返回 [{"text": ..., "token_ids": [...]}, ...]。

        先检查全部提示和参数，有一个不行就抛 ValueError（指明第几个），一个请求都不跑。
        结果里不含结束用的 EOS token。
        """
        params = _per_prompt(sampling_params, len(prompts))
        inputs = [self._tokenize_one(i, p) for i, p in enumerate(prompts)]
        for i, (ids, sp) in enumerate(zip(inputs, params)):  # 全部先查一遍，再排队
            limit = self.engine.max_seq_len
            if len(ids) + sp.max_tokens > limit:
                raise ValueError(f"第 {i} 个提示：{len(ids)} 个 token + max_tokens {sp.max_tokens} "
                                 f"超过了引擎能放下的 {limit} 个 token（max_seq_len）")
        uids = list(range(self.next_uid, self.next_uid + len(inputs)))
        self.next_uid += len(inputs)
        outputs: dict[int, list[int]] = {uid: [] for uid in uids}
        for uid, ids, sp in zip(uids, inputs, params):
            self.add_req(uid, ids, sp)
        while self.runnable:
            for out in self.step():
                eos = out.finished and out.next_token == self.eos_token_id
                ignore_eos = params[out.uid - uids[0]].ignore_eos
                if not eos or ignore_eos:
                    outputs[out.uid].append(out.next_token)
        return [{"text": self.tokenizer.decode(outputs[uid]), "token_ids": outputs[uid]}
                for uid in uids]

    def _tokenize_one(self, index: int, prompt: str | Sequence[int]) -> torch.Tensor:
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, (list, tuple)) and all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = list(prompt)
        else:
            raise ValueError(f"第 {index} 个提示必须是字符串或 token id 的列表，收到 {type(prompt).__name__}")
        vocab = self.engine.model_config.vocab_size
        if not ids:
            raise ValueError(f"第 {index} 个提示是空的")
        if min(ids) < 0 or max(ids) >= vocab:
            raise ValueError(f"第 {index} 个提示：token id 必须在 [0, {vocab}) 之内")
        return torch.tensor(ids, dtype=torch.int32)


def _per_prompt(sampling_params, n: int) -> list[SamplingParams]:
    if sampling_params is None:
        return [SamplingParams()] * n
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * n
    params = list(sampling_params)
    if len(params) != n or not all(isinstance(p, SamplingParams) for p in params):
        raise ValueError(f"sampling_params 要么是一个 SamplingParams，要么是和提示一样多（{n} 个）的列表")
    return params
