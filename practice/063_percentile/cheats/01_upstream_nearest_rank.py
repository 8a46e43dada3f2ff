# 作弊：照上游 mini-sglang 的压测取 s[int(n·q/100)]，不插值
# 为什么必须判错：题目要的是 numpy 默认的线性插值；上游的取法在 n 小于 100 时把 P99 取成最大值，位置也不是 (n − 1)·q/100。
# 判词里要有：上游的做法
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = percentile


def percentile(values, q):
    _checked(values, q)  # 只为了同样地检查参数
    s = sorted(values)
    return float(s[min(len(s) - 1, int(len(s) * q / 100))])
