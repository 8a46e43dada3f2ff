# 作弊：实现登记在 CompositeImplicitAutograd 上（这样不用假实现也能编译）
# 为什么必须判错：题目要求实现登记在 CPU 上：CompositeImplicitAutograd 的实现会被编译器拆成一个个 aten 运算，书里的 C++ 内核根本进不了编译出的图，写它就白写了。
# 判词里要有：CompositeImplicitAutograd
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def register_ops():
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("ex058", "DEF")
    lib.define(SCHEMA)
    lib.impl("linear_int8", linear_int8_cpu, "CompositeImplicitAutograd")
    _LIB = lib
