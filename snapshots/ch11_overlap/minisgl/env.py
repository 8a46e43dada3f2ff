"""引擎的环境变量：全部以 MINISGL_ 开头，``from minisgl.env import ENV`` 后直接读属性。

两条规矩：
- 每次读属性都现读 os.environ：测试和 notebook 会临时改环境变量，读到的永远是当前值。
- 值写错就报错，指出是哪个变量、写了什么、应该写什么；悄悄退回默认值只会让人以为设置生效了。

每个设置是 Env 里的一行 EnvVar（默认值、解析函数、合法的写法）；加一个设置就是在 Env 里加一行。
"""

from __future__ import annotations

import os
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class EnvError(ValueError):
    """某个 MINISGL_* 环境变量的值无法解析。"""


class EnvVar(Generic[T]):
    """一个环境变量：类属性名加上 MINISGL_ 前缀就是变量名。parse 解析不了时抛 ValueError。"""

    def __init__(self, default: T, parse: Callable[[str], T], expect: str) -> None:
        self.default, self.parse, self.expect = default, parse, expect

    def __set_name__(self, owner: type, name: str) -> None:
        self.env_name = "MINISGL_" + name

    def __get__(self, obj: object, owner: type | None = None) -> T:
        raw = os.environ.get(self.env_name, "").strip()
        if not raw:  # 没设置或设成空串，都按默认值
            return self.default
        try:
            return self.parse(raw)
        except ValueError:
            raise EnvError(
                f"环境变量 {self.env_name}={raw!r} 无效：应为 {self.expect}（默认 {self.default!r}）"
            ) from None


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _parse_level(text: str) -> str:
    if text.upper() not in _LEVELS:
        raise ValueError(text)
    return text.upper()


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse_bool(text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(text)


class Env:
    """全部 MINISGL_* 设置。"""

    LOG_LEVEL = EnvVar("INFO", _parse_level, "、".join(_LEVELS) + " 之一（不区分大小写）")
    # 设为 1 时调度器不重叠，每一步等前向做完、处理完结果再排下一步
    DISABLE_OVERLAP_SCHEDULING = EnvVar(False, _parse_bool, "/".join(_TRUE + _FALSE) + " 之一")


ENV = Env()
