# 作弊：达标看平均数
# 为什么必须判错：延迟目标按 P99 定：少数极慢的请求会被平均数藏起来。
# 判词里要有：平均数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = max_rate


def max_rate(runs, ttft_slo, tpot_slo):
    _checked(runs, ttft_slo, tpot_slo)
    best = None
    for rate in sorted(runs):
        ttfts = [t["ttft"] for t in runs[rate]]
        tpots = [t["tpot"] for t in runs[rate] if t["tpot"] is not None]
        if sum(ttfts) / len(ttfts) > ttft_slo or (tpots and sum(tpots) / len(tpots) > tpot_slo):
            break
        best = rate
    return best
