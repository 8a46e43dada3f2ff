"""第 11 章起调度器默认重叠：step() 先发出这一批、再处理上一批，结果晚一步才返回。

第 7–10 章的测试是按"一步当场返回这一步的结果"写的（数每一步的输出、在某一步之后查页数）。
它们检查的行为在第 11 章的树里仍然存在，只是要关掉重叠才看得到：这里让那几章的测试在
MINISGL_DISABLE_OVERLAP_SCHEDULING=1 下运行。重叠模式由第 11 章自己的测试覆盖
（包括批量生成与 HF 逐 token 一致、请求陆续进出、取消）。
"""

from __future__ import annotations

import re

import pytest

_SYNCHRONOUS_STEP_CHAPTERS = range(7, 11)


@pytest.fixture(autouse=True)
def _earlier_chapters_step_synchronously(request, monkeypatch):
    match = re.match(r"test_ch(\d+)_", request.module.__name__.rpartition(".")[2])
    if match and int(match.group(1)) in _SYNCHRONOUS_STEP_CHAPTERS:
        monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
