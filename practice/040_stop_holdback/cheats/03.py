# 作弊：按停止串的顺序取第一个命中的，不是最早的位置
# 为什么必须判错：题目要求几个停止串都出现时取位置最早的那个；它取列表里第一个命中的停止串，排在后面的停止串出现得更早时，多发了它后面的文字。
# 判词里要有：feed

"""练习 040 · 停止串：扣住可能的开头（第 13 章 Tokenizer 与增量反分词）：参考答案。"""

from __future__ import annotations


class StopFilter:
    """流式文字经过它：停止串不发出去，可能是停止串开头的尾巴先扣住。"""

    def __init__(self, stops: list[str]) -> None:
        if any(s == "" for s in stops):
            raise ValueError("停止串不能是空串")
        self.stops = list(stops)
        self.text = ""
        self.sent = 0
        self.stopped = False

    def feed(self, piece: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        self.text += piece
        start = self.sent
        hits = [i for i in (self.text.find(s, start) for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            self.sent = hits[0]
            return self.text[start:self.sent], True
        self.sent = len(self.text) - self._held()
        return self.text[start:self.sent], False

    def _held(self) -> int:
        """末尾最长有几个字符可能是某个停止串的开头（只看还没发出的部分）。"""
        longest = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(self.text) - self.sent), longest, -1):
                if self.text.endswith(stop[:k]):
                    longest = k
                    break
        return longest

    def finish(self) -> str:
        if self.stopped:
            return ""
        rest = self.text[self.sent:]
        self.sent = len(self.text)
        return rest
