# 作弊：max_rate 返回所有达标的 rate 里最大的那个
# 为什么必须判错：压测有噪声，不单调：一个较小的 rate 已经不达标，更大的 rate 碰巧达标不说明服务撑得住；容量是从小到大连续达标的最后一个。
# 判词里要有：连续达标
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = max_rate


def max_rate(runs, ttft_slo, tpot_slo):
    _checked(runs, ttft_slo, tpot_slo)  # 只为了同样地检查参数
    good = [rate for rate in runs if _meets(runs[rate], ttft_slo, tpot_slo)]
    return max(good) if good else None
