# 作弊：abort 不注销 uid
# 为什么必须判错：题目要求 abort 之后这个 uid 不再登记、还没取走的回复也丢掉；它只返回 uid 是否登记着，不注销，取消的 uid 还留在 open_uids 里。
# 判词里要有：open_uids
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _abort_keeps_uid(self, uid):
    return uid in self._queues  # 说“取消了”，uid 却还登记着


ReplyRouter.abort = _abort_keeps_uid
