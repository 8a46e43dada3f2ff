# 作弊：next 每 20 ms 轮询一次，fail 不叫醒任何人
# 为什么必须判错：题目要求 fail 时正在等的协程立刻醒来；它让 next 每 20 ms 轮询一次、fail 不叫醒谁，fail 之后事件循环转了三圈，等待者还在等。
# 判词里要有：还在等
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

async def _polling_next(self, uid):
    queue = self._queues[uid]
    while queue.empty():  # 每 20 ms 看一眼：fail 不叫醒谁，等它们自己发现
        if self._failed is not None:
            del self._queues[uid]
            raise BackendGone(self._failed)
        await asyncio.sleep(0.02)
    item = queue.get_nowait()
    if item[1]:
        del self._queues[uid]
    return item


def _fail_no_wakeup(self, reason):
    if self._failed is None:
        self._failed = reason


ReplyRouter.next = _polling_next
ReplyRouter.fail = _fail_no_wakeup
