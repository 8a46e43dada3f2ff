# 作弊：只查 forward 是不是比 prepare 短、process 里有没有负数
# 为什么必须判错：三个列表哪个长度不对、哪个里有负数都要抛。固定的坏例子恰好是 forward 短了、process 有负数，只查这两处的代码以前能过
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = pipeline_time


def pipeline_time(prepare, forward, process):
    if len(forward) < len(prepare) or any(t < 0 for t in process):
        raise ValueError("参数不对")
    n = min(len(prepare), len(forward), len(process))  # 别的毛病悄悄改好
    return _reference([max(0, t) for t in prepare[:n]], [max(0, t) for t in forward[:n]], list(process[:n]))
