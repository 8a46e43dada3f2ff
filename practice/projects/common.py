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


# ---------------------------------------------------------------- 评判一侧（不碰你的 minisgl）

@lru_cache(maxsize=1)
def hf():
    """Hugging Face 的模型和分词器（float32，CPU）：参照答案都从这里算。"""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from transformers.utils import logging

    logging.disable_progress_bar()
    path = model_path()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # generate 会拿它补上没给的设置：参照的贪心到 EOS 也不停
    return model, AutoTokenizer.from_pretrained(path)


def hf_logits(ids: list[int]):
    """一段 token 每个位置的下一个 token 的 logits（float32 [len, vocab]）。"""
    import torch

    model, _ = hf()
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0].float()


@lru_cache(maxsize=None)
def _greedy(prompt: tuple[int, ...], max_tokens: int) -> tuple[int, ...]:
    import torch
    from transformers import GenerationConfig

    model, _ = hf()
    # 一份干净的生成配置：不带模型自带的 EOS（到 EOS 不停）、也不带任何 logits 处理
    config = GenerationConfig(max_new_tokens=max_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt]), generation_config=config)
    tokens = tuple(out[0, len(prompt):].tolist())
    assert len(tokens) == max_tokens, "HF 在 EOS 处停下了：参照要的是不停的贪心"
    return tokens


def hf_greedy(prompt: list[int], max_tokens: int) -> list[int]:
    """Hugging Face 逐个 token 的贪心：每步取 argmax，到了 EOS 也照常接着生成（配合 ignore_eos）。

    不用 min_new_tokens：它在够数之前把 EOS 的 logit 压成 -inf，选出的就不再是 argmax。
    """
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
    _os_write(fd, _dumps(result).encode())
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
