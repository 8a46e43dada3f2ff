# 作弊：任务里的异常吞掉，不在 synchronize() 里抛
# 为什么必须判错：题目要求任务里抛了异常时，CpuEvent.synchronize() 把同一个异常重新抛出来；它只等任务做完、把异常吞掉，任务失败了 synchronize() 却没有抛。
# 判词里要有：却没有抛
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_synchronize = CpuEvent.synchronize
def _quiet(self):
    self._done.wait()
CpuEvent.synchronize = _quiet
