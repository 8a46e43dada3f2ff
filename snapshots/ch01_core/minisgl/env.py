"""引擎的环境变量设置：全部以 MINISGL_ 开头，带类型、默认值和清楚的报错。

用法：``from minisgl.env import ENV``，然后直接读 ``ENV.LOG_LEVEL``、
``ENV.DISABLE_OVERLAP_SCHEDULING`` 这样的属性，得到的是已经解析好的 Python 值。

两个设计选择：
- 每次读属性都重新读一次 os.environ。启动器会在拉起子进程之前改环境变量（例如每个
  TP rank 的线程数），测试也会临时改它们；现读现解析，读到的永远是当前的值。
- 值写错了就报错，并指出是哪个变量、写了什么、应该写什么。悄悄退回默认值看似宽容，
  实际上会让人以为"关掉重叠调度"生效了，却查不出为什么没变化。
"""

from __future__ import annotations

import os
from typing import Callable, Generic, TypeVar, overload

ENV_PREFIX = "MINISGL_"

T = TypeVar("T")


class EnvError(ValueError):
    """某个 MINISGL_* 环境变量的值无法解析。"""


class EnvVar(Generic[T]):
    """一个环境变量的描述符：类属性名加上前缀就是变量名。

    parse 把字符串解析成值，解析不了就抛 ValueError；expect 用一句话说明合法的写法，
    会原样出现在报错里。
    """

    def __init__(self, default: T, parse: Callable[[str], T], expect: str, help: str) -> None:
        self.default = default
        self.parse = parse
        self.expect = expect
        self.help = help
        self.env_name = ""  # 由 __set_name__ 填上

    def __set_name__(self, owner: type, name: str) -> None:
        self.env_name = ENV_PREFIX + name

    @overload
    def __get__(self, obj: None, owner: type) -> EnvVar[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj, owner=None):
        if obj is None:  # 从类上访问时返回描述符本身，方便列出全部变量
            return self
        return self.read()

    def read(self) -> T:
        raw = os.environ.get(self.env_name)
        if raw is None or raw.strip() == "":  # 没设置或设成空串，都按默认值
            return self.default
        try:
            return self.parse(raw.strip())
        except ValueError:
            raise EnvError(
                f"环境变量 {self.env_name}={raw!r} 无效：应为{self.expect}"
                f"（默认值 {self.default!r}）"
            ) from None


# ---- 几种常用类型的解析函数 ----

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _parse_bool(text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(text)


def env_bool(default: bool, help: str) -> EnvVar[bool]:
    return EnvVar(default, _parse_bool, "1/0、true/false、yes/no 或 on/off 之一", help)


def env_int(default: int | None, help: str, minimum: int | None = None) -> EnvVar:
    def parse(text: str) -> int:
        value = int(text)  # "abc"、"1.5" 都会抛 ValueError
        if minimum is not None and value < minimum:
            raise ValueError(text)
        return value

    expect = "整数" if minimum is None else f"不小于 {minimum} 的整数"
    return EnvVar(default, parse, expect, help)


def env_float(default: float, help: str, minimum: float | None = None) -> EnvVar[float]:
    def parse(text: str) -> float:
        value = float(text)
        if value != value or (minimum is not None and value < minimum):  # 拒绝 nan
            raise ValueError(text)
        return value

    expect = "实数" if minimum is None else f"不小于 {minimum} 的实数"
    return EnvVar(default, parse, expect, help)


def env_choice(default: str, choices: tuple[str, ...], help: str) -> EnvVar[str]:
    def parse(text: str) -> str:
        if text.upper() not in choices:
            raise ValueError(text)
        return text.upper()

    return EnvVar(default, parse, "以下之一（不区分大小写）：" + "、".join(choices), help)


class Env:
    """全部 MINISGL_* 设置。类属性名去掉前缀后就是变量名的后半段。"""

    # ---- 日志 ----
    LOG_LEVEL = env_choice(
        "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), "日志级别"
    )

    # ---- 运行时 ----
    DISABLE_OVERLAP_SCHEDULING = env_bool(False, "关闭重叠调度（第 11 章），调度器退回普通循环")
    CPU_THREADS = env_int(
        None, "每个进程的 CPU 线程数；不设置时由引擎按 TP 进程数平分 CPU 核", minimum=1
    )

    # ---- 交互式 shell（第 15 章）的默认采样参数 ----
    SHELL_MAX_TOKENS = env_int(2048, "shell 每轮最多生成的 token 数", minimum=1)
    SHELL_TEMPERATURE = env_float(0.6, "shell 的采样温度", minimum=0.0)
    SHELL_TOP_K = env_int(-1, "shell 的 top-k，-1 表示不限制", minimum=-1)
    SHELL_TOP_P = env_float(1.0, "shell 的 top-p", minimum=0.0)

    @classmethod
    def variables(cls) -> dict[str, EnvVar]:
        """按定义顺序列出全部变量：属性名 -> 描述符。"""
        return {name: v for name, v in vars(cls).items() if isinstance(v, EnvVar)}

    def as_dict(self) -> dict[str, object]:
        """读出全部变量的当前值（变量名 -> 值）；任何一个写错都会在这里报错。

        启动时调用一次，可以把配置错误挡在真正开始干活之前。
        """
        return {v.env_name: v.read() for v in self.variables().values()}

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Env({items})"


ENV = Env()
