# 作弊：schema 把 x 标成会被改写（Tensor(a!) x），还把 d 改名叫 scale
# 为什么必须判错：题目规定了 schema；标成 (a!) 的参数编译器会当成被原地改写来处理（多出拷贝、不敢重排），参数名不同则按关键字调用时对不上。
# 判词里要有：schema
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

SCHEMA = "linear_int8(Tensor(a!) x, Tensor q, Tensor scale) -> Tensor"
