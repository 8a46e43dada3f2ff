# 作弊：不登记算子，只写一个普通的 Python 函数 linear_int8，register_ops 什么都不做
# 为什么必须判错：题目要求 torch.ops.ex058.linear_int8 是登记过的算子：模型代码按名字调用它，torch.compile 把它作为一个节点留在图里；普通函数既不在 torch.ops 里，编译时也会被拆开追踪进去。
# 判词里要有：找不到
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int8(x, q, d):
    return linear_int8_cpu(x, q, d)


def register_ops():
    return None
