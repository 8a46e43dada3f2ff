# 作弊：Library 对象是 register_ops 里的局部变量，用另一个全局标记挡住第二次调用
# 为什么必须判错：题目要求登记之后 torch.ops.ex058.linear_int8 能用；Library 对象在函数返回后被回收，它登记的 schema、实现、假实现全都跟着撤销，算子就不见了。
# 判词里要有：找不到
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_DONE = False


def register_ops():
    global _DONE
    if _DONE:
        return
    lib = torch.library.Library("ex058", "DEF")
    lib.define(SCHEMA)
    lib.impl("linear_int8", linear_int8_cpu, "CPU")
    torch.library.register_fake("ex058::linear_int8", linear_int8_fake, lib=lib)
    _DONE = True
