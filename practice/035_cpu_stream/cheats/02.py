# 作弊：submit 里当场执行（没有工作线程）
# 为什么必须判错：题目要求构造时启动一个工作线程、submit 不等执行就立刻返回；它在 submit 里当场执行任务，任务跑在调用 submit 的线程上，任务被堵住时 submit 也跟着堵住。
# 判词里要有：调用 submit 的线程
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class CpuEvent:
    def __init__(self, error=None):
        self.error = error
    def synchronize(self):
        if self.error is not None:
            raise self.error
    def query(self):
        return True

class CpuStream:
    def __init__(self):
        self.closed = False
    def submit(self, fn, *args):
        if self.closed:
            raise RuntimeError("已关闭")
        try:
            fn(*args)
        except BaseException as error:
            return CpuEvent(error)
        return CpuEvent()
    def synchronize(self):
        pass
    def close(self):
        self.closed = True
