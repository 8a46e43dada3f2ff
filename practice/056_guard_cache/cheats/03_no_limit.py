# 作弊：没有重编译上限，一直编下去
# 为什么必须判错：题目要求 compile_fn 调用了 recompile_limit 次以后退回 eager；没有上限时，一个每次都变的守卫值会让每一步都花几秒重新编译。
# 判词里要有：recompile_limit｜compiles
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_init = CompileCache.__init__


def __init__(self, eager, compile_fn, recompile_limit=8):
    _init(self, eager, compile_fn, recompile_limit)
    self.recompile_limit = 10**9


CompileCache.__init__ = __init__
