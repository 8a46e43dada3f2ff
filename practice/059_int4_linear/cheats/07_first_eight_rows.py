# 作弊：linear_int4 只算 x 的前 8 行（照着“decode 时 x 只有几行”写死了上限），多出的行悄悄丢掉
# 为什么必须判错：引擎的 prefill 和大批 decode 也走量化的线性层，x 有几百行；丢掉的行是别的请求的 token，
# 形状不对会在下一层报错，形状凑对了就是悄悄算错
# 判词里要有：形状
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_linear = linear_int4


def linear_int4(x, packed, d, m):
    return _linear(x[:8], packed, d, m)
