"""练习 039 的评测：随机文字编码后切成随机的块逐块喂进去，每一块之后和参考答案比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import _codecs
import codecs
import contextlib
import encodings.utf_8
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_equal, check_type, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
ALPHABETS = ["abcXYZ 019.,\n", "éßΩ€", "世界你好中文字节假名", "こんにちはカタカナ", "😀🎉🌟🚀"]


_WATCHING = False  # 正在调用学习者的代码时为 True


def _forbidden(real, what: str):
    """把标准库里现成的增量 UTF-8 解码换成这个：评测学习者的代码时一调用就判“未通过”。

    只看名字的检查拦不住 getattr(encodings.utf_8, "Incremental" + "Decoder") 这类写法，所以在
    导入学习者的文件之前就把它们换掉。不在评测学习者时照常工作（读文件、打印回溯要用到它们）。"""
    def guarded(*args, **kwargs):
        if _WATCHING:
            raise CheckFailed(f"不许用{what}：它正是这道题要你写的东西")
        return real(*args, **kwargs)
    return guarded


@contextlib.contextmanager
def _no_stdlib_incremental_utf8():
    info = codecs.lookup("utf-8")  # 注册表缓存的这一份：getincrementaldecoder、io 都从它取
    saved = [(encodings.utf_8, "IncrementalDecoder"), (encodings.utf_8, "StreamReader"),
             (info, "incrementaldecoder"), (info, "streamreader"), (codecs, "getincrementaldecoder"),
             (codecs, "getreader"), (codecs, "iterdecode")]
    saved = [(obj, name, getattr(obj, name)) for obj, name in saved]
    for obj, name, real in saved:
        setattr(obj, name, _forbidden(real, f" codecs 的增量解码器（{name}）"))
    real_decode = codecs.utf_8_decode  # 第三个参数 final=False 就是增量解码

    def utf_8_decode(data, errors="strict", final=False):
        if _WATCHING and not final:
            raise CheckFailed("不许用 codecs.utf_8_decode(..., final=False)：它正是这道题要你写的东西")
        return real_decode(data, errors, final)

    codecs.utf_8_decode = _codecs.utf_8_decode = utf_8_decode
    try:
        yield
    finally:
        for obj, name, real in saved:
            setattr(obj, name, real)
        codecs.utf_8_decode = _codecs.utf_8_decode = real_decode


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


# 跨进程评测时，上面那些替换要装在学习者的进程里：它在导入学习者的代码之前执行
PRELUDE = """
import _codecs
import codecs
import encodings.utf_8


class CheckFailed(AssertionError):
    pass


def _forbidden(what):
    def guarded(*args, **kwargs):
        raise CheckFailed(f"不许用{what}：它正是这道题要你写的东西")
    return guarded


_info = codecs.lookup("utf-8")
for _obj, _name in [(encodings.utf_8, "IncrementalDecoder"), (encodings.utf_8, "StreamReader"),
                    (_info, "incrementaldecoder"), (_info, "streamreader"), (codecs, "getincrementaldecoder"),
                    (codecs, "getreader"), (codecs, "iterdecode")]:
    setattr(_obj, _name, _forbidden(f" codecs 的增量解码器（{_name}）"))
_real_decode = codecs.utf_8_decode


def utf_8_decode(data, errors="strict", final=False):
    if not final:
        raise CheckFailed("不许用 codecs.utf_8_decode(..., final=False)：它正是这道题要你写的东西")
    return _real_decode(data, errors, final)


codecs.utf_8_decode = _codecs.utf_8_decode = utf_8_decode
"""


def run(mod: object) -> None:
    global _WATCHING
    source = Path(mod.__file__).read_text(encoding="utf-8").lower()
    check("codecs" not in source and "incrementaldecoder" not in source,
          "不许用 codecs 模块（它的增量解码器正是这道题要你写的东西）")
    _WATCHING = True
    try:
        _run(mod)
    finally:
        _WATCHING = False


def _run(mod: object) -> None:
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
    with _no_stdlib_incremental_utf8():  # 在导入学习者的文件之前换掉
        main(run, prelude=PRELUDE)
