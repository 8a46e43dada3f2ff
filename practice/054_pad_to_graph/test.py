"""练习 054 的评测：随机的档位表、随机的批（请求数从 1 到比最大档位还多），和参考实现逐项比较；
坏参数每一种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check_equal, check_raises, check_type, main, mistake_hint, require, seed, short

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：按档位从小到大走一遍，不用集合
# ---------------------------------------------------------------------------


def ref_sizes(explicit, max_bs: int, max_running_req: int) -> list[int]:
    if explicit is None:
        candidates = [1, 2, 4] + [8 * k for k in range(1, max_bs // 8 + 1)]
        candidates = [bs for bs in candidates if bs <= max_bs]
    else:
        candidates = sorted(explicit)
    out: list[int] = []
    for bs in candidates:
        if bs <= max_running_req and (not out or out[-1] != bs):
            out.append(bs)
    return out


def ref_pad(reqs, sizes, dummy) -> dict:
    n = len(reqs)
    target = None
    for bs in sizes:
        if bs >= n:
            target = bs
            break
    items = list(reqs) + [dummy] * ((target - n) if target is not None else 0)
    return {"graph_bs": target, "rows": [it[0] for it in items], "positions": [it[1] for it in items],
            "out_loc": [it[2] for it in items]}


# ---------------------------------------------------------------------------
# 随机的输入
# ---------------------------------------------------------------------------


def random_sizes_args(rng: random.Random):
    max_running_req = rng.choice([1, 3, 8, 16, 20, 256, 256, rng.randint(1, 300)])
    if rng.random() < 0.4:
        explicit = [rng.randint(1, 300) for _ in range(rng.randint(0, 8))]
        if explicit and rng.random() < 0.5:
            explicit.append(rng.choice(explicit))  # 有重复
        return explicit, rng.randint(0, 300), max_running_req
    return None, rng.choice([0, 1, 2, 3, 4, 7, 8, 9, 16, 17, 40, 160, rng.randint(0, 300)]), max_running_req


def random_batch(rng: random.Random):
    sizes = ref_sizes(*random_sizes_args(rng)) if rng.random() < 0.85 else []
    top = sizes[-1] if sizes else 4
    n = rng.choice([1, top, top + 1, rng.randint(1, top + 5)])
    num_rows = n + rng.randint(0, 10)
    rows = rng.sample(range(num_rows), n)
    slots = rng.sample(range(4 * n + 50), n)
    reqs = [(r, rng.randint(0, 500), s) for r, s in zip(rows, slots)]
    dummy = (num_rows, 0, 4 * n + 50 + rng.randint(0, 3))  # 占位行在最后，占位槽位不和任何真实请求重
    return reqs, sizes, dummy


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_sizes(mod, explicit, max_bs, max_running_req) -> None:
    before = copy.deepcopy(explicit)
    call = f"capture_sizes({short(explicit, 60)}, max_bs={max_bs}, max_running_req={max_running_req})"
    got = mod.capture_sizes(explicit, max_bs, max_running_req)
    check_type(got, list, f"{call} 的返回值")
    want = ref_sizes(explicit, max_bs, max_running_req)
    hits = []
    if explicit is None and got == [bs for bs in [1, 2, 4, 8, 16, 32, 64, 128, 256] if bs <= min(max_bs, max_running_req)] \
            and got != want:
        hits.append("档位是 2 的幂：8 以后是每 8 个一档（8、16、24……）")
    if explicit is None and got == ref_sizes(None, max_bs, 10**9) and got != want:
        hits.append("没去掉比 max_running_req 大的档位")
    check_equal(got, want, call, mistake_hint(hits))
    check_equal(explicit, before, f"{call} 之后的 explicit（不该改动参数）")


def check_pad(mod, reqs, sizes, dummy) -> None:
    before = copy.deepcopy((reqs, sizes, dummy))
    call = f"pad_decode_batch({short(reqs, 80)}, sizes={short(sizes, 60)}, dummy={dummy})"
    got = mod.pad_decode_batch(reqs, sizes, dummy)
    check_type(got, dict, f"{call} 的返回值")
    check_equal(sorted(got), ["graph_bs", "out_loc", "positions", "rows"], f"{call} 返回的字典的键")
    want = ref_pad(reqs, sizes, dummy)
    hits = []
    n = len(reqs)
    if sizes and n <= sizes[-1] and got.get("graph_bs") == sizes[-1] != want["graph_bs"]:
        hits.append("补到了最大的档位：应该补到不小于请求数的最小档位")
    if got.get("rows", [None])[:1] == [dummy[0]] and want["rows"][0] != dummy[0]:
        hits.append("占位请求放在了前面：它们跟在真实请求后面")
    if want["graph_bs"] is None and got.get("graph_bs") is not None:
        hits.append(f"请求数 {n} 比最大的档位还多（或者没有档位）：不走图，graph_bs 是 None")
    for key in ("graph_bs", "rows", "positions", "out_loc"):
        check_equal(got[key], want[key], f"{call} 的 {key}", mistake_hint(hits))
    check_equal((reqs, sizes, dummy), before, f"{call} 之后的参数（不该改动）")


def check_bad_arguments(mod, rng: random.Random) -> None:
    bads = [
        (mod.capture_sizes, ([4, 0, 8], 8, 16), "档位里有 0"),
        (mod.capture_sizes, ([4, -rng.randint(1, 9)], 8, 16), "档位里有负数"),
        (mod.capture_sizes, ([True, 4], 8, 16), "档位里有 True（bool 不算整数）"),
        (mod.capture_sizes, ([2.0, 4], 8, 16), "档位里有小数 2.0"),
        (mod.capture_sizes, (None, -rng.randint(1, 9), 16), "max_bs 是负数"),
        (mod.capture_sizes, (None, 8, 0), "max_running_req 是 0"),
        (mod.capture_sizes, ([4], 8, -rng.randint(1, 9)), "max_running_req 是负数"),
    ]
    reqs, _, dummy = random_batch(rng)
    while len(reqs) < 2:
        reqs, _, dummy = random_batch(rng)
    sizes = [1, 2, 4, 8, 16]
    i, j = rng.sample(range(len(reqs)), 2)
    same_row = [list(r) for r in reqs]
    same_row[j][0] = same_row[i][0]
    same_slot = [list(r) for r in reqs]
    same_slot[j][2] = same_slot[i][2]
    on_dummy_row = [list(r) for r in reqs]
    on_dummy_row[i][0] = dummy[0]
    on_dummy_slot = [list(r) for r in reqs]
    on_dummy_slot[i][2] = dummy[2]
    bads += [
        (mod.pad_decode_batch, ([], sizes, dummy), "reqs 是空的"),
        (mod.pad_decode_batch, (reqs, [1, 4, 2, 8], dummy), "档位表不是升序"),
        (mod.pad_decode_batch, (reqs, [1, 2, 2, 8], dummy), "档位表有重复"),
        (mod.pad_decode_batch, (reqs, [0, 2, 8], dummy), "档位表里有 0"),
        (mod.pad_decode_batch, ([tuple(r) for r in same_row], sizes, dummy), "两个请求在同一行"),
        (mod.pad_decode_batch, ([tuple(r) for r in same_slot], sizes, dummy), "两个请求写同一个槽位"),
        (mod.pad_decode_batch, ([tuple(r) for r in on_dummy_row], sizes, dummy), "真实请求用了占位行"),
        (mod.pad_decode_batch, ([tuple(r) for r in on_dummy_slot], sizes, dummy), "真实请求用了占位槽位"),
    ]
    for fn, args, why in bads:
        check_raises(ValueError, fn, *args, what=f"{fn.__name__}{short(args, 100)}（{why}）")


def run(mod: object) -> None:
    require(mod, "capture_sizes")
    require(mod, "pad_decode_batch")
    rng = random.Random(SEED)
    check_equal(mod.capture_sizes(None, 20, 256), [1, 2, 4, 8, 16], "题面里的例子 capture_sizes(None, 20, 256)")
    check_equal(mod.pad_decode_batch([(0, 5, 17), (2, 9, 40), (1, 3, 7)], [1, 2, 4, 8], (8, 0, 256)),
                {"graph_bs": 4, "rows": [0, 2, 1, 8], "positions": [5, 9, 3, 0], "out_loc": [17, 40, 7, 256]},
                "题面里的例子 pad_decode_batch")
    check_sizes(mod, None, 160, 256)  # GPU 上的默认
    for _ in range(150):
        check_sizes(mod, *random_sizes_args(rng))
    for _ in range(150):
        check_pad(mod, *random_batch(rng))
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
