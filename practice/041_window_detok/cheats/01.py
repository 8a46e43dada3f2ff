# 作弊：每次都解码全部 token（平方代价）
# 为什么必须判错：题目要求不能每次都解码全部 token，decode 解码的 token 总数不超过 30 × token 数 + 100；它每次 push 都解码全部 token，代价是平方的，几百个 token 的流就超了。
# 判词里要有：不要每次都解码全部

class IncrementalDecoder:
    def __init__(self, decode):
        self.decode, self.ids, self.sent = decode, [], 0

    def push(self, ids):
        self.ids += ids
        stable = self.decode(self.ids).rstrip("�")
        out, self.sent = stable[self.sent:], len(stable)
        return out

    def flush(self):
        text = self.decode(self.ids)
        out, self.sent = text[self.sent:], len(text)
        return out
