# 作弊：全部攒到 finish 再解码
# 为什么必须判错：题目要求每来一块就交出已经完整的字符；它全部攒到 finish 才解码，feed 总是返回空串，每块之后交出的文字和 pending 都和参考不一样。
# 判词里要有：交出的文字
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _feed(self, chunk):
    self.buffer += chunk
    return ""


def _finish(self):
    text = bytes(self.buffer).decode("utf-8", errors="replace")
    self.buffer.clear()
    return text


Utf8Stream.feed = _feed
Utf8Stream.finish = _finish
