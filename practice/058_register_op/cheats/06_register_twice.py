# 作弊：register_ops 每次调用都重新登记
# 为什么必须判错：题目要求第二次调用什么都不做：同一个命名空间 DEF 两次、同一个算子 register_fake 两次，torch 都会报错；引擎里好几处都会调用登记函数（第 19 章的 load_kernels 用 _loaded 挡住）。
# 判词里要有：第二次调用
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_KEEP = []


def register_ops():
    lib = torch.library.Library("ex058", "DEF")
    lib.define(SCHEMA)
    lib.impl("linear_int8", linear_int8_cpu, "CPU")
    torch.library.register_fake("ex058::linear_int8", linear_int8_fake, lib=lib)
    _KEEP.append(lib)
