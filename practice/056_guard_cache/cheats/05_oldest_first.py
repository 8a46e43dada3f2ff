# 作弊：从最早编译的那份往后找
# 为什么必须判错：题目要求从最新的一份往回找；两份的守卫都通过时（它们读的名字不同），用哪一份决定了结果。
# 判词里要有：结果
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_call = CompileCache.__call__


def __call__(self, inputs):
    for guards, compiled in self.entries:  # 旧的在前：先查最早的
        if all(name in inputs and _typed(inputs[name]) == want for name, want in guards.items()):
            return compiled(inputs)
    return _call(self, inputs)


CompileCache.__call__ = __call__
