"""minisgl：一步步手写的 SGLang 风格推理引擎。

包本身不导入任何东西，各部分按需导入，例如 ``from minisgl.core import Req``。
"""
