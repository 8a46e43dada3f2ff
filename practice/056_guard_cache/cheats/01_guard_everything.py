# 作弊：守卫装在全部输入上，不管编译时读没读到
# 为什么必须判错：题目要求守卫只装在 used 里的名字上；装在全部输入上，每一步都变的值（step、时间戳）会让每次调用都重编译，几步之后就到了上限，退回 eager。
# 判词里要有：结果｜compiles
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_call = CompileCache.__call__


def __call__(self, inputs):
    fn = self.compile_fn
    self.compile_fn = lambda inp: (fn(inp)[0], set(inp))
    try:
        return _call(self, inputs)
    finally:
        self.compile_fn = fn


CompileCache.__call__ = __call__
