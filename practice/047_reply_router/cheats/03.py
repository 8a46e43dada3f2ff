# 作弊：abort 不注销 uid
# 为什么必须判错：它绕过了这道题的要点（abort 不注销 uid），只在测试没查到的地方才“对”。
# 判词里要有：open_uids
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _abort_keeps_uid(self, uid):
    return uid in self._queues  # 说“取消了”，uid 却还登记着


ReplyRouter.abort = _abort_keeps_uid
