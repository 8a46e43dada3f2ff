# 作弊：finish 丢掉被截断的半个字
# 为什么必须判错：题目要求流停在一个字中间时 finish() 交出一个 "\ufffd" 并清空；它把截断的半个字悄悄丢掉、返回空串，输出拼起来不等于 decode(errors="replace")。
# 判词里要有：finish()
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _finish(self):
    self.buffer.clear()
    return ""


Utf8Stream.finish = _finish
