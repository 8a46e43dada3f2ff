# 作弊：每块单独解码（半个字变成替换符）
# 为什么必须判错：它绕过了这道题的要点（每块单独解码（半个字变成替换符）），只在测试没查到的地方才“对”。
# 判词里要有：交出的文字
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _feed(self, chunk):
    return chunk.decode("utf-8", errors="replace")


Utf8Stream.feed = _feed
