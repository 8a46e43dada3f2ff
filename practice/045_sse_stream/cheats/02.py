# 作弊：按两个 \n 切事件（不认 \r\n）
# 为什么必须判错：题目要求一行以 \n 或 \r\n 结尾、空行结束事件，非 JSON 的数据原样交出字符串；它只按两个 \n 切事件，用 \r\n 的事件切不开，纯文本数据交给 json.loads 还会直接抛错。
# 判词里要有：\r\n
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class SSEParser:
    def __init__(self):
        self._buffer = b""

    def feed(self, chunk):
        self._buffer += chunk
        *done, self._buffer = self._buffer.split(b"\n\n")
        events = []
        for raw in done:
            lines = [l[5:].removeprefix(" ") for l in raw.decode().split("\n") if l.startswith("data:")]
            if lines:
                text = "\n".join(lines)
                events.append(DONE if text == DONE else json.loads(text))
        return events
