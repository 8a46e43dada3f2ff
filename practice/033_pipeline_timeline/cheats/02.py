# 作弊：max(CPU 的和, 前向的和)
# 为什么必须判错：它绕过了这道题的要点（max(CPU 的和, 前向的和)），只在测试没查到的地方才“对”。
# 判词里要有：max(CPU 的和, 前向的和)
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def pipeline_time(prepare, forward, process):
    if not len(prepare) == len(forward) == len(process) or min([*prepare, *forward, *process], default=0) < 0:
        raise ValueError("参数不对")
    normal = sum(prepare) + sum(forward) + sum(process)
    return normal, max(sum(prepare) + sum(process), sum(forward))
