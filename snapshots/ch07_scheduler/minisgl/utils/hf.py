"""和 Hugging Face 格式打交道的小工具：加载模型目录里的分词器。"""

from __future__ import annotations

from pathlib import Path


def load_tokenizer(model_path: str | Path):
    """模型目录里的分词器（transformers 的 AutoTokenizer）。"""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_path))
