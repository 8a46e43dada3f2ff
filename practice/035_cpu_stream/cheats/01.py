# 作弊：用 concurrent.futures 的线程池
# 为什么必须判错：题目要求用 threading（和 queue）亲手写工作线程，不要用 concurrent.futures；它直接套 ThreadPoolExecutor，评测发现它用了 concurrent.futures。
# 判词里要有：concurrent.futures
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

from concurrent.futures import ThreadPoolExecutor

class CpuEvent:
    def __init__(self, future):
        self.future = future
    def synchronize(self):
        self.future.result()
    def query(self):
        return self.future.done()

class CpuStream:
    def __init__(self):
        self.pool, self.closed = ThreadPoolExecutor(1), False
    def submit(self, fn, *args):
        if self.closed:
            raise RuntimeError("已关闭")
        return CpuEvent(self.pool.submit(fn, *args))
    def synchronize(self):
        self.pool.submit(lambda: None).result()
    def close(self):
        self.closed = True
        self.pool.shutdown(wait=True)
