# 作弊：躲过名字检查拿 encodings.utf_8 的增量解码器
# 为什么必须判错：题目不许用 codecs 的增量解码器；它改从 encodings.utf_8 里拼名字拿 IncrementalDecoder，还是同一个东西，评测照样查出它用了不许用的增量解码器。
# 判词里要有：不许用

import encodings.utf_8 as u

_Decoder = getattr(u, "Incremental" + "Decoder")


class Utf8Stream:
    def __init__(self):
        self.decoder = _Decoder(errors="replace")

    def feed(self, chunk):
        return self.decoder.decode(chunk)

    @property
    def pending(self):
        return len(self.decoder.getstate()[0])

    def finish(self):
        return self.decoder.decode(b"", final=True) if self.pending else ""
