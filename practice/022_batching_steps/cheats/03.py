# 作弊：decode 批按 uid 排序（而不是接纳的先后）
# 为什么必须判错：题目要求 decode 批按接纳的先后排、不是按 uid；它把 decode 批按 uid 排序，uid 的顺序和到达顺序不一样时（如例子里的 7、5）批里的顺序就错了。
# 判词里要有：按接纳的先后排
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_admission_order = simulate
def simulate(requests, max_running, continuous):
    return [(p, sorted(b) if p == "decode" else b) for p, b in _admission_order(requests, max_running, continuous)]
