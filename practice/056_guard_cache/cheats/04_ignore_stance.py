# 作弊：记下姿态，但 fail_on_recompile 时照样重编译
# 为什么必须判错：题目要求 fail_on_recompile 时要重编就抛 RuntimeError；第 18 章靠它保证录好的那份一直在用，悄悄重编会把一步 decode 变成几秒。
# 判词里要有：RuntimeError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_call = CompileCache.__call__


def __call__(self, inputs):
    stance, self.stance = self.stance, "default"
    try:
        return _call(self, inputs)
    finally:
        self.stance = stance


CompileCache.__call__ = __call__
