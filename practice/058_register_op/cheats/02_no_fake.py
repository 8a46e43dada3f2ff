# 作弊：只 define 和 impl，不登记假实现
# 为什么必须判错：题目要求用 register_fake 登记假实现：torch.compile 追踪时用的是没有数据的 FakeTensor，没有假实现就不知道输出的形状，fullgraph=True 的编译当场失败；meta 张量上也调用不了。
# 判词里要有：假实现
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def register_ops():
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("ex058", "DEF")
    lib.define(SCHEMA)
    lib.impl("linear_int8", linear_int8_cpu, "CPU")
    _LIB = lib
