# 作弊：每个任务一个线程
# 为什么必须判错：它绕过了这道题的要点（每个任务一个线程），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class CpuStream:
    def __init__(self):
        self.closed, self.threads = False, []
    def submit(self, fn, *args):
        if self.closed:
            raise RuntimeError("已关闭")
        event = CpuEvent()
        def work():
            try:
                fn(*args)
            except BaseException as error:
                event._error = error
            finally:
                event._done.set()
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        self.threads.append(thread)
        return event
    def synchronize(self):
        for thread in self.threads:
            thread.join()
    def close(self):
        self.synchronize()
        self.closed = True
