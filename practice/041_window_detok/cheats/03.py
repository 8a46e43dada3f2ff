# 作弊：从 decode 身上找不计数的参照 decode，每次解码全部
# 为什么必须判错：题目要求用给的 decode、而且不能每次都解码全部 token；它从 decode 的全局变量里翻出不计数的参照 decode，每次解码全部，评测照样查出代价是平方的。
# 判词里要有：不要每次都解码全部

def _uncounted(decode):
    for f in (decode, getattr(type(decode), "__call__", None)):
        found = getattr(f, "__globals__", {}).get("reference_decode")
        if found is not None:
            return found
    return decode


class IncrementalDecoder:
    def __init__(self, decode):
        self.decode, self.ids, self.sent = _uncounted(decode), [], 0

    def push(self, ids):
        self.ids += ids
        stable = self.decode(self.ids).rstrip("�")
        out, self.sent = stable[self.sent:], len(stable)
        return out

    def flush(self):
        text = self.decode(self.ids)
        out, self.sent = text[self.sent:], len(text)
        return out
