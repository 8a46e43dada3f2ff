"""Hugging Face transformers 的参照实现：书里的测试和 main 拿它来对答案。

全部用 float32、贪心解码，和我们的引擎逐 token 比较。同一进程里每个模型目录只加载一次。
"""

from __future__ import annotations

import functools
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.utils import logging as hf_logging


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """暂时只让 transformers 说错误：加载时的提示、警告和进度条都不往 stderr 上打。"""
    verbosity = hf_logging.get_verbosity()
    progress_bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if progress_bars:
            hf_logging.enable_progress_bar()


def hf_greedy(path: str | Path, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """transformers 的 generate 贪心生成，只返回新 token，正好 max_new_tokens 个（遇到 eos 也不停）。"""
    model = _model(_key(path))
    input_ids = torch.tensor([list(prompt_ids)])
    # 不给 attention_mask 时，transformers 会把等于 pad_token_id 的位置当成填充遮掉；
    # SmolLM2 的 pad 就是 <|im_end|>，聊天 prompt 里到处都是，所以一定要显式给全 1。
    attention_mask = torch.ones_like(input_ids)
    with quiet_transformers(), torch.inference_mode():
        output = model.generate(input_ids, attention_mask=attention_mask,
                                generation_config=_greedy_config(max_new_tokens))
    new_ids = output[0, input_ids.shape[1]:].tolist()
    assert len(new_ids) == max_new_tokens, (len(new_ids), max_new_tokens)
    return new_ids


def hf_greedy_rounded(path: str | Path, prompt_ids: list[int], max_new_tokens: int,
                      round_weight: Callable[[str, torch.Tensor], torch.Tensor],
                      round_input: Callable[[torch.Tensor], torch.Tensor] | None = None) -> list[int]:
    """同 hf_greedy，但每个线性层（LM head 也算）的权重先换成 round_weight(层名, 权重)，
    给了 round_input 的话，每个线性层的输入（压成 [行数, K]）也先换成 round_input(输入)。

    给量化过的引擎对答案：把权重（和激活）量化再解回 float32，HF 就用和引擎一模一样的数在算。
    LM head 和词嵌入共用权重时先拆开：只换 LM head 那份，查表仍用原来的。
    """
    model = _rounded_model(_key(path), round_weight, round_input)
    input_ids = torch.tensor([list(prompt_ids)])
    with quiet_transformers(), torch.inference_mode():
        output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                                generation_config=_greedy_config(max_new_tokens))
    return output[0, input_ids.shape[1]:].tolist()


def hf_perplexity(path: str | Path, ids: list[int],
                  round_weight: Callable[[str, torch.Tensor], torch.Tensor] | None = None,
                  round_input: Callable[[torch.Tensor], torch.Tensor] | None = None) -> float:
    """HF 在 ids 上的困惑度：exp(每个位置预测下一个 token 的平均负对数似然)。
    round_weight、round_input 同 hf_greedy_rounded。"""
    model = (_model(_key(path)) if round_weight is None and round_input is None
             else _rounded_model(_key(path), round_weight or _same_weight, round_input))
    input_ids = torch.tensor([list(ids)])
    with quiet_transformers(), torch.inference_mode():
        logits = model(input_ids).logits[0, :-1].float()
    return torch.nn.functional.cross_entropy(logits, input_ids[0, 1:]).exp().item()


def _same_weight(name: str, w: torch.Tensor) -> torch.Tensor:
    return w


@functools.lru_cache(maxsize=4)
def _rounded_model(path: str, round_weight: Callable[[str, torch.Tensor], torch.Tensor],
                   round_input: Callable[[torch.Tensor], torch.Tensor] | None = None):
    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config = GenerationConfig()
    head = model.get_output_embeddings()
    if head.weight is model.get_input_embeddings().weight:
        head.weight = torch.nn.Parameter(head.weight.detach().clone())
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(round_weight(name, module.weight.detach()))
                if round_input is not None:
                    module.register_forward_pre_hook(
                        lambda mod, args: (round_input(args[0].reshape(-1, args[0].shape[-1])).view(args[0].shape),))
    return model


def hf_logits(path: str | Path, prompt_ids: list[int],
              round_weight: Callable[[str, torch.Tensor], torch.Tensor] | None = None,
              round_input: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """一次前向的 logits，形状 [len(prompt_ids), vocab_size]，float32。round_weight、round_input 同 hf_greedy_rounded。"""
    model = (_model(_key(path)) if round_weight is None and round_input is None
             else _rounded_model(_key(path), round_weight or _same_weight, round_input))
    with quiet_transformers(), torch.inference_mode():
        return model(torch.tensor([list(prompt_ids)])).logits[0].float()


def encode(path: str | Path, text: str) -> list[int]:
    """用模型目录里的分词器把文本变成 token id。

    按分词器的默认行为处理特殊 token（add_special_tokens=True）：SmolLM2 和 Qwen3 的分词器
    默认都不加 BOS/EOS，所以得到的就是文本本身的 token。
    """
    return _tokenizer(_key(path)).encode(text)


def decode(path: str | Path, token_ids: list[int]) -> str:
    """encode 的反方向，特殊 token 原样保留。"""
    return _tokenizer(_key(path)).decode(list(token_ids))


def _key(path: str | Path) -> str:
    """缓存的键：同一个目录不管怎么写路径都只加载一次。"""
    return str(Path(path).expanduser().resolve())


@functools.lru_cache(maxsize=None)
def _model(path: str):
    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    # 换掉模型自带的生成配置（里面有 eos、采样参数）。只在调用时传 eos_token_id=None 不够：
    # generate 会拿模型自带配置里的值补上“没设置”的字段，eos 又回来了。
    model.generation_config = GenerationConfig()
    return model


@functools.lru_cache(maxsize=None)
def _tokenizer(path: str):
    with quiet_transformers():
        return AutoTokenizer.from_pretrained(path)


def _greedy_config(max_new_tokens: int) -> GenerationConfig:
    """贪心、没有 eos（所以不会提前停）、正好生成 max_new_tokens 个。"""
    # 只有一条序列、不需要填充；给个 pad_token_id 只是免得 transformers 去猜。
    return GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens,
                            eos_token_id=None, pad_token_id=0)
