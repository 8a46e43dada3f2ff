# 作弊：bytearray 当成 bytes 放过去（旧评测的坏值只有 set、object()、类本身）
# 为什么必须判错：题目只认 None、bool、int、float、str、bytes、list、tuple、dict 和 dataclass 实例，其他任何值都要抛 TypeError；bytearray 不是 bytes，悄悄换成 bytes 发出去，收件方拿到的类型就变了。
# 判词里要有：bytearray
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_strict_to_wire = to_wire


def to_wire(obj):  # 参考答案里递归调用的也是这个名字
    if isinstance(obj, bytearray):
        return bytes(obj)
    return _strict_to_wire(obj)
