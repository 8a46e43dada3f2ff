# 作弊：给未知 uid 的回复攒在 defaultdict 里，open 时交给新 uid
# 为什么必须判错：题目要求 uid 没登记过、已结束或已取消时回复直接丢掉；它把给未知 uid 的回复攒起来，之后 open 出同一个 uid 时交给新请求，新请求拿到了不属于它的旧回复。
# 判词里要有：直接丢掉
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

from collections import defaultdict

STALE = defaultdict(asyncio.Queue)  # 给还没登记的 uid 的回复：攒着
_open = ReplyRouter.open


def _open_with_stale(self):
    uid = _open(self)
    if uid in STALE:
        self._queues[uid] = STALE.pop(uid)  # 新 uid 接手当时没人要的旧回复
    return uid


def _deliver_keep_unknown(self, uid, piece, finished):
    (self._queues.get(uid) or STALE[uid]).put_nowait((piece, finished))


ReplyRouter.open = _open_with_stale
ReplyRouter.deliver = _deliver_keep_unknown
