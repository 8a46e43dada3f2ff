"""练习 056 · 守卫与重编译：一个和 dynamo 同样规则的编译缓存（第 18 章 图捕获）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


class CompileCache:
    def __init__(self, eager, compile_fn, recompile_limit: int = 8) -> None:
        """eager(inputs) 是不编译时的执行；compile_fn(inputs) -> (compiled, used)。"""
        raise NotImplementedError

    def set_stance(self, name: str) -> None:
        """"default" 或 "fail_on_recompile"；别的名字抛 ValueError。"""
        raise NotImplementedError

    def __call__(self, inputs: dict):
        """按守卫找一份编译结果来执行；找不到就按规则报错、编译或退回 eager。"""
        raise NotImplementedError
