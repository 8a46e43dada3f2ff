"""练习 039 的评测：随机文字编码后切成随机的块逐块喂进去，每一块之后和参考答案比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_type, main, require, short

SEED = 2039
ALPHABETS = ["abcXYZ 019.,\n", "éßΩ€", "世界你好中文字节假名", "こんにちはカタカナ", "😀🎉🌟🚀"]


class Reference:
    """参照：不看格式，逐个尝试“缓冲区的前 k 个字节能不能严格解码”。慢，但显然对。"""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, chunk: bytes) -> str:
        self.buffer += chunk
        for keep in range(0, 4):  # 末尾留 keep 个字节，其余能严格解码就交出
            head = self.buffer[:len(self.buffer) - keep]
            try:
                text = head.decode("utf-8")
            except UnicodeDecodeError:
                continue
            self.buffer = self.buffer[len(head):]
            return text
        raise AssertionError("合法的 UTF-8 前缀最多只差 3 个字节")

    def finish(self) -> str:
        rest = self.buffer.decode("utf-8", errors="replace")
        self.buffer = b""
        return rest


def random_data(rng: random.Random) -> bytes:
    text = "".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(rng.randint(0, 30)))
    data = text.encode()
    if data and rng.random() < 0.3:  # 流停在一个字的中间
        data = data[:-rng.randint(1, 3)]
    return data


def cut(rng: random.Random, data: bytes) -> list[bytes]:
    mode = rng.choice(["ones", "small", "whole"])
    if mode == "whole":
        return [data]
    chunks, i = [], 0
    while i < len(data):
        step = 1 if mode == "ones" else rng.randint(0, 6)  # 也有空块
        chunks.append(data[i:i + step])
        i += step
    return chunks


def run(mod: object) -> None:
    source = Path(mod.__file__).read_text(encoding="utf-8").lower()
    check("codecs" not in source and "incrementaldecoder" not in source,
          "不许用 codecs 模块（它的增量解码器正是这道题要你写的东西）")
    Utf8Stream = require(mod, "Utf8Stream")

    s = Utf8Stream()
    data = "A世😀".encode()
    for chunk, want, pending in [(data[:2], "A", 1), (data[2:6], "世", 2), (data[6:], "😀", 0)]:
        got = s.feed(chunk)
        check_type(got, str, f"feed({chunk!r}) 的返回值")
        check_equal(got, want, f"题目例子里 feed({chunk!r}) 交出的文字")
        check_equal(s.pending, pending, f"题目例子里 feed({chunk!r}) 之后的 pending")
    check_equal(s.finish(), "", "题目例子最后的 finish()")
    t = Utf8Stream()
    check_equal(t.feed("好".encode()[:2]), "", "只喂“好”的前两个字节时交出的文字")
    check_equal(t.finish(), "\ufffd", "“好”只到两个字节时的 finish()")
    check_equal(t.pending, 0, "finish() 之后的 pending")

    rng = random.Random(SEED)
    for _ in range(300):
        data = random_data(rng)
        ours, ref = Utf8Stream(), Reference()
        fed, out = b"", ""
        for chunk in cut(rng, data):
            fed += chunk
            got = ours.feed(chunk)
            check_type(got, str, "feed 的返回值")
            want = ref.feed(chunk)
            check("\ufffd" not in got, f"feed 交出了替换符 “\\ufffd”：半个字应该留在手里。已经喂了 {short(fed)}")
            check_equal(got, want, "feed 交出的文字（已经完整的字都要马上交出）", f"已经喂了 {short(fed)}")
            check_equal(ours.pending, len(ref.buffer), "pending", f"已经喂了 {short(fed)}")
            out += got
        rest = ours.finish()
        check_equal(rest, ref.finish(), "finish() 的返回值", f"整个流是 {short(data)}")
        check_equal(out + rest, data.decode("utf-8", errors="replace"), "全部输出拼起来", short(data))


if __name__ == "__main__":
    main(run)
