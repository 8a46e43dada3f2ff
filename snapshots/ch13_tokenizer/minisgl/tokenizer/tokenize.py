"""分词：把 API server 收到的文本或对话变成调度器要的 token id。"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:
    from minisgl.message import TokenizeMsg


class TokenizeManager:
    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def tokenize(self, msgs: Sequence[TokenizeMsg]) -> list[torch.Tensor]:
        """每条消息一个 1 维 int32 张量。输入不合法时抛 ValueError（中文说明哪里不对）。"""
        return [torch.tensor(self.encode(msg.text), dtype=torch.int32) for msg in msgs]

    def encode(self, text: str | list[dict[str, str]]) -> list[int]:
        if isinstance(text, str):
            # 补全接口：文本原样分词，特殊 token 照分词器的默认（SmolLM2、Qwen3 都不加 BOS）
            ids = self.tokenizer.encode(text)
        else:
            _check_chat(text)
            # 对话接口：套模型自带的聊天模板，末尾加上“助手开始回答”的那几个 token。
            # 直接 tokenize=True：模板里已经有特殊 token，不能再让 encode 加一遍
            ids = self.tokenizer.apply_chat_template(
                text, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        if len(ids) == 0:
            raise ValueError("提示是空的：分词之后一个 token 也没有")
        return list(ids)


def _check_chat(messages) -> None:
    if not isinstance(messages, list) or len(messages) == 0:
        raise ValueError("messages 必须是非空的列表")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(
                m.get("content"), str):
            raise ValueError(f"第 {i} 条消息必须是带字符串 role 和 content 的字典，收到 {m!r}")
