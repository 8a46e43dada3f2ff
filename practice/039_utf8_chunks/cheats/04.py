# 作弊：用 codecs 的增量解码器
# 为什么必须判错：题目明确不许用 codecs 模块（它的增量解码器正是要你写的东西）；它直接用 codecs.getincrementaldecoder，评测发现它用了 codecs。
# 判词里要有：codecs

import codecs


class Utf8Stream:
    def __init__(self):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk):
        return self.decoder.decode(chunk)

    @property
    def pending(self):
        return len(self.decoder.getstate()[0])

    def finish(self):
        return self.decoder.decode(b"", final=True)
