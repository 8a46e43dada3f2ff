"""大作业验收的公用部分：判词用的 Fail、子进程的入口、Hugging Face 的参照。

子进程入口（accept.py 调用）：python common.py <模块> <种子> <结果文件>
它在你的树里 import 那个模块，跑 produce(seed)，把返回的字典写成 JSON。
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from functools import lru_cache
from pathlib import Path

# 结果用这两个在 import 你的 minisgl 之前就拿到的函数写出：改 Path.write_text、json.dumps 影响不到它。
# 这防的是无心的改动，不防存心的：你的代码和记录在同一个进程里（见 docs/wrapup/projects.md）
_dumps, _os_write = json.dumps, os.write


class Fail(Exception):
    """验收没通过：消息就是判词。"""


class Missing(Exception):
    """你的树里还没有这个项目要的接口：消息说缺什么。"""


def model_path() -> str:
    from minibook.models import smollm2

    return str(smollm2())


def new_llm(**config):
    """用你的树里的 LLM 建一个引擎；不认识的参数说明接口还没加。"""
    from minisgl.llm import LLM

    try:
        return LLM(model_path(), **config)
    except TypeError as e:
        raise Missing(f"LLM(...) 还不认识这次要用的参数（{e}）") from None


def on_forward(llm, see) -> None:
    """每次前向之前先调用 see(batch)：验收靠它记下交给模型的每一批。"""
    forward = llm.engine.forward_batch

    def recorded(batch, args):
        see(batch)
        return forward(batch, args)

    llm.engine.forward_batch = recorded


def run_ignore_eos(llm, prompts: list[list[int]], max_tokens: int, max_steps: int
                   ) -> tuple[dict[int, list[int]], dict[int, list[int]], bool]:
    """uid 0, 1, … 依次交给调度器，一步步跑（最多 max_steps 步：原地打转时也会停下来）。

    返回每个 uid 的输出、结束标记出现在第几个 token 之后、跑完之后是否还有事要做。
    """
    import torch

    from minisgl.core import SamplingParams

    for uid, ids in enumerate(prompts):
        llm.add_req(uid, torch.tensor(ids, dtype=torch.int32),
                    SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    outputs: dict[int, list[int]] = {uid: [] for uid in range(len(prompts))}
    finished: dict[int, list[int]] = {uid: [] for uid in range(len(prompts))}
    for _ in range(max_steps):
        if not llm.runnable:
            break
        for out in llm.step():
            outputs[out.uid].append(out.next_token)
            if out.finished:
                finished[out.uid].append(len(outputs[out.uid]))
    return outputs, finished, llm.runnable


# ---------------------------------------------------------------- 评判一侧（不碰你的 minisgl）
# 参照用书的辅助包里的 minibook.hf（float32、贪心到 EOS 也不停），这里只按模型路径、按提示记住结果

@lru_cache(maxsize=1)
def tokenizer():
    from minibook.hf import quiet_transformers
    from transformers import AutoTokenizer

    with quiet_transformers():
        return AutoTokenizer.from_pretrained(model_path())


def hf_logits(ids: list[int]):
    """一段 token 每个位置的下一个 token 的 logits（float32 [len, vocab]）。"""
    from minibook import hf

    return hf.hf_logits(model_path(), ids)


@lru_cache(maxsize=None)
def _greedy(prompt: tuple[int, ...], max_tokens: int) -> tuple[int, ...]:
    from minibook import hf

    return tuple(hf.hf_greedy(model_path(), list(prompt), max_tokens))


def hf_greedy(prompt: list[int], max_tokens: int) -> list[int]:
    """HF 的贪心，正好 max_tokens 个（配合 ignore_eos）；同一个提示只算一次。"""
    return list(_greedy(tuple(prompt), max_tokens))


def _child(module_name: str, seed: int, out: Path) -> int:
    import common  # 作为脚本跑时本文件是 __main__：项目模块抛的是 common.Missing

    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # 先打开：produce 之前
    module = importlib.import_module(module_name)
    try:
        result = module.produce(seed)
    except common.Missing as e:
        print(f"缺接口：{e}", file=sys.stderr)
        return 3
    data = _dumps(result).encode()
    while data:  # os.write 可能只写了一部分
        data = data[_os_write(fd, data):]
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
