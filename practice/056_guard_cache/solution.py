"""练习 056 · 守卫与重编译：一个和 dynamo 同样规则的编译缓存（第 18 章 图捕获）

参考答案。
"""

from __future__ import annotations

STANCES = ("default", "fail_on_recompile")


def _typed(value):
    """值连同类型：1、1.0、True 是三个不同的守卫值；tuple 里的每个元素也一样。"""
    if isinstance(value, tuple):
        return (tuple, tuple(_typed(v) for v in value))
    return (type(value), value)


class CompileCache:
    def __init__(self, eager, compile_fn, recompile_limit: int = 8) -> None:
        """eager(inputs) 是不编译时的执行；compile_fn(inputs) -> (compiled, used)。"""
        if isinstance(recompile_limit, bool) or not isinstance(recompile_limit, int) or recompile_limit < 1:
            raise ValueError(f"recompile_limit 要是正整数，收到 {recompile_limit!r}")
        self.eager, self.compile_fn, self.recompile_limit = eager, compile_fn, recompile_limit
        self.stance = "default"
        self.compiles = 0
        self.entries: list[tuple[dict, object]] = []  # (守卫, 编译结果)，旧的在前

    def set_stance(self, name: str) -> None:
        """"default" 或 "fail_on_recompile"；别的名字抛 ValueError。"""
        if name not in STANCES:
            raise ValueError(f"姿态只能是 {STANCES}，收到 {name!r}")
        self.stance = name

    def __call__(self, inputs: dict):
        """按守卫找一份编译结果来执行；找不到就按规则报错、编译或退回 eager。"""
        for guards, compiled in reversed(self.entries):
            if all(name in inputs and _typed(inputs[name]) == want for name, want in guards.items()):
                return compiled(inputs)
        if self.stance == "fail_on_recompile" and self.compiles > 0:
            raise RuntimeError(f"守卫没有一份通过，要 recompile，但姿态是 fail_on_recompile：{inputs!r}")
        if self.compiles >= self.recompile_limit:
            return self.eager(inputs)
        self.compiles += 1
        compiled, used = self.compile_fn(inputs)
        guards = {name: _typed(inputs[name]) for name in used}
        self.entries.append((guards, compiled))
        return compiled(inputs)
