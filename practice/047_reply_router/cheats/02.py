# 作弊：fail 只记下原因，不叫醒正在等的协程
# 为什么必须判错：题目要求 fail 时正在等的协程也要立刻醒来抛 BackendGone；它只记下原因，不叫醒任何人，正在 await next 的协程一直挂住了。
# 判词里要有：挂住了
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _fail_quietly(self, reason):
    if self._failed is None:
        self._failed = reason  # 只记下原因：正在等的协程没人叫醒


ReplyRouter.fail = _fail_quietly
