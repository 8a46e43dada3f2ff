# 作弊：每个任务一个线程
# 为什么必须判错：题目要求所有任务都在同一个工作线程上按提交顺序一个个执行，close 要让线程退出；它每个任务开一个线程，任务并发执行、顺序不保证、执行线程不止一个。
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
