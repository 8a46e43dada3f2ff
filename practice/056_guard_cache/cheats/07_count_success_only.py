# 作弊：compile_fn 成功了才算一次 compiles
# 为什么必须判错：题目要求编译失败也算一次；不算的话，一个总是编译失败的输入会无限次地重试编译，上限永远到不了。
# 判词里要有：compiles
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_call = CompileCache.__call__


def __call__(self, inputs):
    before = self.compiles
    try:
        return _call(self, inputs)
    except ValueError:
        self.compiles = before
        raise


CompileCache.__call__ = __call__
