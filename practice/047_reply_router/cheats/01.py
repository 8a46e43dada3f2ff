# 作弊：所有 uid 共用一个队列
# 为什么必须判错：题目要求每条回复交给正在等这个 uid 的协程；它把所有 uid 的回复放进同一个队列，几个请求并发时 next(a) 拿到的可能是别的 uid 的回复。
# 判词里要有：next(a) 不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class ReplyRouter:
    def __init__(self):
        self._queue = asyncio.Queue()
        self._open = set()
        self._next_uid = 0
        self._failed = None

    def open(self):
        if self._failed is not None:
            raise BackendGone(self._failed)
        uid = self._next_uid
        self._next_uid += 1
        self._open.add(uid)
        return uid

    def deliver(self, uid, piece, finished):
        if uid in self._open:
            self._queue.put_nowait((uid, piece, finished))

    async def next(self, uid):
        item = await self._queue.get()
        if item == "gone":
            self._open.discard(uid)
            raise BackendGone(self._failed)
        if item[2]:
            self._open.discard(uid)
        return item[1], item[2]

    def abort(self, uid):
        if uid in self._open:
            self._open.discard(uid)
            return True
        return False

    def fail(self, reason):
        self._failed = reason
        for _ in self._open:
            self._queue.put_nowait("gone")

    @property
    def open_uids(self):
        return set(self._open)
