# 作弊：行号只查上界（row < len(table)），负数照样按 Python 的规矩从后往前取
# 为什么必须判错：题目要求 row 不是 table 的下标时抛 ValueError；页表在设备上是张量，负的行号在 GPU 内核里就是越界读别处的内存，Python 列表的“倒着取”只是碰巧没出事。
# 判词里要有：行号是负数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_layout = flashinfer_layout


def flashinfer_layout(table, reqs, page_size):
    fixed = [(row % len(table) if -len(table) <= row < 0 else row, e, d) for row, e, d in reqs] if table else reqs
    return _layout(table, fixed, page_size)
