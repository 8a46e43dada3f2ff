# 作弊：假实现直接调用真正的计算（在 FakeTensor 上它照样能跑出形状）
# 为什么必须判错：题目要求假实现不做任何运算：书里真的内核是 C++，要读 data_ptr，FakeTensor 和 meta 张量都没有数据；把真的计算塞进假实现，追踪时白白做一遍矩阵乘，换成 C++ 内核就直接崩。
# 判词里要有：真正的运算
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int8_fake(x, q, d):
    return linear_int8_cpu(x, q, d)
