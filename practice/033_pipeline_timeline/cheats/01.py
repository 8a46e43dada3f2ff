# 作弊：每一步单独取 max，不模拟等待往后传
# 为什么必须判错：题目要求模拟 CPU 和设备之间的等待并往后传（前向要等设备空出来、处理要等前向做完）；它每一步单独取 max(准备 + 处理, 前向) 再相加，CPU 和设备交替成为瓶颈时总时间不对。
# 判词里要有：每一步单独取了 max
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def pipeline_time(prepare, forward, process):
    if not len(prepare) == len(forward) == len(process) or min([*prepare, *forward, *process], default=0) < 0:
        raise ValueError("参数不对")
    normal = sum(prepare) + sum(forward) + sum(process)
    return normal, sum(max(p + r, f) for p, f, r in zip(prepare, forward, process))
