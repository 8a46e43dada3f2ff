"""练习 040 的评测：随机文字切成随机的段逐段喂进去，每一段之后和参考答案比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check_equal, check_raises, check_type, main, require, short, seed, probe_bad_arguments, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
ALPHABET = "ab \n"


class Reference:
    """参照：每一步把“发到哪里”从头算一遍（慢，但直接照定义写）。"""

    def __init__(self, stops: list[str]) -> None:
        self.stops, self.text, self.sent, self.stopped = stops, "", 0, False

    def feed(self, piece: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        self.text += piece
        unsent = self.text[self.sent:]
        positions = [unsent.find(s) for s in self.stops if s in unsent]
        if positions:
            self.stopped = True
            out = unsent[:min(positions)]
            self.sent += len(out)
            return out, True
        # 最长的、是某个停止串真前缀的尾巴
        hold = max([k for k in range(len(unsent) + 1)
                    if any(k < len(s) and unsent.endswith(s[:k]) for s in self.stops)], default=0)
        out = unsent[:len(unsent) - hold]
        self.sent += len(out)
        return out, False

    def finish(self) -> str:
        if self.stopped:
            return ""
        out = self.text[self.sent:]
        self.sent = len(self.text)
        return out


def random_case(rng: random.Random) -> tuple[list[str], list[str]]:
    longest = rng.choice([2, 4, 8, 16])  # 停止串也有很长的：只留 4 个字符的缓冲过不去
    stops = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, longest))) for _ in range(rng.randint(1, 3))]
    pieces = ["".join(rng.choice(ALPHABET) for _ in range(rng.choice([0, 1, 1, 2, 3, 5])))
              for _ in range(rng.randint(0, 12))]
    return stops, pieces


def run(mod: object) -> None:
    StopFilter = require(mod, "StopFilter")
    check_raises(ValueError, StopFilter, ["ok", ""], what='StopFilter(["ok", ""])')
    rng = random.Random(SEED + 1)  # 空串在随机的位置：只查最后一个 / 第一个的代码过不去
    stops = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 7))) for _ in range(rng.randint(3, 6))]
    probe_bad_arguments(lambda stops: StopFilter(stops), dict(stops=stops), dict(stops=lambda r: with_bad_item(r, stops, lambda s, r: "")),
                        rng, name="StopFilter", tries=20)

    examples = [(["\n\n", "END"], [("Hello", ("Hello", False)), (" E", (" ", False)),
                                   ("ND of it", ("", True)), ("more", ("", True))], ""),
                (["world"], [("hello wor", ("hello ", False)), ("k", ("work", False)),
                             (" wo", (" ", False))], "wo")]
    for stops, steps, rest in examples:
        f = StopFilter(stops)
        for piece, want in steps:
            got = f.feed(piece)
            check_type(got, tuple, f"feed({piece!r}) 的返回值")
            check_equal(got, want, f"题目例子 stops={stops!r} 里 feed({piece!r})")
        check_equal(f.finish(), rest, f"题目例子 stops={stops!r} 最后的 finish()")

    rng = random.Random(SEED)
    for _ in range(600):
        stops, pieces = random_case(rng)
        ours, ref = StopFilter(stops), Reference(stops)
        fed = []
        for piece in pieces:
            fed.append(piece)
            got = ours.feed(piece)
            check_type(got, tuple, "feed 的返回值")
            check_equal(got, ref.feed(piece), "feed 的返回值 (发出的文字, 是否命中)",
                        f"stops={stops!r}，依次喂了 {short(fed)}")
        check_equal(ours.finish(), ref.finish(), "finish() 的返回值", f"stops={stops!r}，依次喂了 {short(fed)}")


if __name__ == "__main__":
    main(run)
