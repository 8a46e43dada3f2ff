# 作弊：按行号排好序再排布（觉得“一批按行号排”更整齐）
# 为什么必须判错：题目要求按 reqs 给的顺序：第 b 个请求的 query 在 q 张量里的位置是调度器按这个顺序拼的，换了顺序，每个 query 就配上了别的请求的 key。
# 判词里要有：不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_layout = flashinfer_layout


def flashinfer_layout(table, reqs, page_size):
    return _layout(table, sorted(reqs), page_size)
