# 作弊：每块单独解码（半个字变成替换符）
# 为什么必须判错：题目要求半个字留在手里等下一块、绝不交出“�”；它每块单独解码，字被块边界切开时（汉字、emoji，尤其一个字节一块）交出替换符，后半截又变成一串替换符。
# 判词里要有：交出的文字
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _feed(self, chunk):
    return chunk.decode("utf-8", errors="replace")


Utf8Stream.feed = _feed
