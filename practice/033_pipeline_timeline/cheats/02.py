# 作弊：max(CPU 的和, 前向的和)
# 为什么必须判错：题目要求按规则逐步模拟重叠的时间线；它直接取 CPU 总时间和前向总时间里较大的那个，漏了第一段准备和最后一段处理这些没法重叠的部分，例子里得 15 而不是 18。
# 判词里要有：max(CPU 的和, 前向的和)
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def pipeline_time(prepare, forward, process):
    if not len(prepare) == len(forward) == len(process) or min([*prepare, *forward, *process], default=0) < 0:
        raise ValueError("参数不对")
    normal = sum(prepare) + sum(forward) + sum(process)
    return normal, max(sum(prepare) + sum(process), sum(forward))
