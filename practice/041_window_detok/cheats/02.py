# 作弊：每次都解码全部 token，再把计数清零
# 为什么必须判错：它绕过了这道题的要点（每次都解码全部 token，再把计数清零），只在测试没查到的地方才“对”。
# 判词里要有：不要每次都解码全部

class IncrementalDecoder:
    def __init__(self, decode):
        self.decode, self.ids, self.sent = decode, [], 0

    def push(self, ids):
        self.ids += ids
        stable = self.decode(self.ids).rstrip("�")
        if hasattr(self.decode, "tokens"):
            self.decode.tokens = 0
        out, self.sent = stable[self.sent:], len(stable)
        return out

    def flush(self):
        text = self.decode(self.ids)
        out, self.sent = text[self.sent:], len(text)
        return out
