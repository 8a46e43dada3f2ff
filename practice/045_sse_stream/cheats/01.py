# 作弊：每一块收到就解码（一个汉字的 UTF-8 字节被切开）
# 为什么必须判错：题目要求块可能切开一个汉字的 UTF-8 字节，要整行收齐再解码；它每块收到就解码，1 个字节一块地喂时汉字、emoji 被切开变成替换符，交出的事件内容不对。
# 判词里要有：不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class SSEParser:
    def __init__(self):
        self._text = ""
        self._data = []

    def feed(self, chunk):
        self._text += chunk.decode("utf-8", errors="replace")
        events = []
        while "\n" in self._text:
            line, self._text = self._text.split("\n", 1)
            line = line.removesuffix("\r")
            if line == "":
                if self._data:
                    text = "\n".join(self._data)
                    events.append(DONE if text == DONE else _json_or_text(text))
                self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
        return events
