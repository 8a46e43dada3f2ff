"""练习 060 的评测：随机的路由（均匀的、偏斜的、一部分格子是 -1 的、把上界用满的、一行里有重复专家的），
和参考实现比较 sorted_ids、expert_ids、num_tokens_post_padded；查类型、查参数没被改动；同样的形状换一种
路由再调一次，缓冲区的长度不能变；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (CheckFailed, bad_int, check_equal, check_int_list, check_raises, check_type, in_child, main,
                      mistake_hint, probe_bad_arguments, require, seed, short, with_bad_item)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
BLOCKS = (1, 2, 3, 4, 8, 16, 64)


# ---------------------------------------------------------------------------
# 参考实现：把 (专家, 格子编号) 对整个排序，再一段一段地切；总长 = 上界加上“差几行凑满一块”
# ---------------------------------------------------------------------------


def ref_capacity(pairs: int, experts: int, block: int) -> int:
    worst = pairs + experts * (block - 1)
    return worst + (-worst) % block


def ref_align(rows: list[list[int]], block: int, experts: int) -> tuple[list[int], list[int], int]:
    k = len(rows[0])
    pairs = len(rows) * k
    flat = [e for row in rows for e in row]
    ordered = sorted((e, slot) for slot, e in enumerate(flat) if e != -1)
    sorted_ids, expert_ids = [], []
    i = 0
    while i < len(ordered):
        e = ordered[i][0]
        segment = []
        while i < len(ordered) and ordered[i][0] == e:
            segment.append(ordered[i][1])
            i += 1
        short_by = (-len(segment)) % block
        sorted_ids.extend(segment + [pairs] * short_by)
        expert_ids.extend([e] * ((len(segment) + short_by) // block))
    used = len(sorted_ids)
    capacity = ref_capacity(pairs, experts, block)
    sorted_ids.extend([pairs] * (capacity - used))
    expert_ids.extend([-1] * (capacity // block - len(expert_ids)))
    return sorted_ids, expert_ids, used


# ---------------------------------------------------------------------------
# 常见错误：每一种都照着“错的写法”算一遍，学习者的结果和哪几种的一样，判词里就点出来
# ---------------------------------------------------------------------------


def wrong_align(rows, block, experts, *, minus="skip", pad="round", order="slot", fill="pairs",
                tail="shape", ids="blocks"):
    M, k = len(rows), len(rows[0])
    pairs = M * k
    blank = {"pairs": pairs, "-1": -1, "M": M}[fill]
    cells = [(m, j) for m in range(M) for j in range(k)]
    if order == "jm":
        cells = [(m, j) for j in range(k) for m in range(M)]
    buckets = [[] for _ in range(experts + 1)]  # 第 experts 个桶：minus="counted" 时放 -1 的格子
    for m, j in cells:
        e = rows[m][j]
        if e == -1:
            if minus == "skip":
                continue
            e = experts - 1 if minus == "last" else experts
        buckets[e].append(m if order == "token" else m * k + j)
    if order == "desc":
        buckets = [b[::-1] for b in buckets]
    sorted_ids, expert_ids = [], []
    if pad == "none":
        sorted_ids = [s for b in buckets for s in b]
        owner = [e for e, b in enumerate(buckets) for _ in b]
        expert_ids = [owner[i] for i in range(0, len(owner), block)]
    else:
        for e, b in enumerate(buckets):
            n = -(-len(b) // block)
            if pad == "every" and e < experts:
                n = max(n, 1)
            sorted_ids += b + [blank] * (n * block - len(b))
            expert_ids += [e if e < experts else -1] * n
    used = len(sorted_ids)
    if tail == "shape":
        capacity = ref_capacity(pairs, experts, block)
    elif tail == "pairs_only":
        capacity = -(-pairs // block) * block
        if capacity < used:  # 这时错的写法给出的长度和“按实际行数算”一样，分不出来，不点它
            return None
    else:
        capacity = used
    sorted_ids += [blank] * (capacity - used)
    expert_ids += [-1] * (capacity // block - len(expert_ids))
    present = sorted({e for e in (x for row in rows for x in row) if e != -1})
    if ids == "present":
        expert_ids = present
    elif ids == "present_padded":
        expert_ids = present + [-1] * (capacity // block - len(present))
    elif ids == "all":
        expert_ids = list(range(experts))
    return sorted_ids, expert_ids, used


MISTAKES = [
    ("每个专家的那一段没有补空行到 block_size 的整数倍：一块里混进了两个专家的行，GPU 上算这一块的程序只读一个专家的权重",
     dict(pad="none")),
    ("没有格子的专家也占了一块：格子数是 0 的专家不占块（(0 + block_size − 1) // block_size = 0）", dict(pad="every")),
    ("同一专家内的格子没按编号升序：先按 j、再按 m 走了。按 m 外层、j 内层走，编号 m·k + j 才是升序",
     dict(order="jm")),
    ("同一专家内的格子排成了降序：要按格子编号从小到大", dict(order="desc")),
    ("sorted_ids 里放的是 token 编号 m，不是格子编号 m·k + j：算子要靠格子编号找到这一行的 topk_weights",
     dict(order="token")),
    ("-1 的格子被算进了最后一个专家（Python 里 buckets[-1] 就是最后一个桶，不报错）：-1 要先跳过",
     dict(minus="last")),
    ("-1 的格子也排了进来、算进了用到的行数：-1 的专家在别的 rank 上，本 rank 跳过它", dict(minus="counted")),
    ("空行填的是 -1：空行要填 pairs = M·k（一个不存在的格子编号）", dict(fill="-1")),
    ("空行填的是 token 数 M：空行要填格子数 pairs = M·k", dict(fill="M")),
    ("缓冲区的长度是按这次路由实际用到的行数算的：长度只能取决于形状，要补到 padded_capacity(M·k, E, block_size)",
     dict(tail="used")),
    ("总长只把 M·k 取整到了整块，没算每个专家最多要补的 block_size − 1 行：路由一偏，缓冲区就装不下",
     dict(tail="pairs_only")),
    ("expert_ids 是每个（有格子的）专家一项：要每块一项，一个专家占几块就记几项，末尾没用到的块是 -1",
     dict(ids="present")),
    ("expert_ids 是每个（有格子的）专家一项、再补 -1：要每块一项，一个专家占几块就记几项", dict(ids="present_padded")),
    ("expert_ids 列出了所有专家：要每块一项，没有格子的专家不占块", dict(ids="all")),
]

PARTS = {
    "len_sorted": lambda r: len(r[0]),
    "sorted": lambda r: r[0],
    "len_experts": lambda r: len(r[1]),
    "experts": lambda r: r[1],
    "used": lambda r: r[2],
}


def hints(got, want, rows, block, experts, part: str) -> str:
    pick = PARTS[part]
    hits = []
    for text, opts in MISTAKES:
        wrong = wrong_align(rows, block, experts, **opts)
        if wrong is not None and pick(wrong) == pick(got) and pick(wrong) != pick(want):
            hits.append(text)
    return mistake_hint(hits)


# ---------------------------------------------------------------------------
# 随机的路由
# ---------------------------------------------------------------------------


def random_routing(rng: random.Random, M: int, k: int, experts: int, kind: str) -> list[list[int]]:
    if kind == "uniform":
        rows = [rng.sample(range(experts), k) for _ in range(M)]
    elif kind == "skewed":  # 所有 token 都挑同 k 个专家（各行里的先后随机）
        favourite = rng.sample(range(experts), k)
        rows = [rng.sample(favourite, k) for _ in range(M)]
    elif kind == "hot":  # 大多数 token 挑最热的几个专家
        hot = rng.sample(range(experts), min(experts, rng.randint(k, k + 2)))
        rows = [rng.sample(hot, k) if rng.random() < 0.8 else rng.sample(range(experts), k) for _ in range(M)]
    else:  # "repeat"：一行里可以有重复的专家
        rows = [[rng.randrange(experts) for _ in range(k)] for _ in range(M)]
    share = rng.choice([0.0, 0.0, rng.uniform(0.05, 0.6)])  # 专家并行：这一部分格子在别的 rank 上
    return [[-1 if rng.random() < share else e for e in row] for row in rows]


def worst_routing(rng: random.Random, block: int, experts: int) -> list[list[int]]:
    """每个专家都是“整块再多一个格子”：把上界 M·k + E·(block_size − 1) 用满。"""
    M = rng.choice([1, block + 1])
    return [rng.sample(range(experts), experts) for _ in range(M)]


def random_shape(rng: random.Random) -> tuple[int, int, int, int]:
    experts = rng.randint(1, 16)
    return rng.randint(1, 60), rng.randint(1, experts), experts, rng.choice(BLOCKS)


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def describe(rows, block, experts, kind) -> str:
    M, k = len(rows), len(rows[0])
    return f"topk_ids={short(rows, 150)}（M={M}, k={k}, {kind}），block_size={block}，num_experts={experts}"


def call_checked(mod, rows, block, experts, kind):
    """调用一次，查返回值的类型，再查参数没被改动（参数放在学习者的进程里：跨进程传的本来就是拷贝）。"""
    call = f"align_blocks({describe(rows, block, experts, kind)})"
    held = in_child(mod, copy.deepcopy(rows))
    got = mod.align_blocks(held, block, experts)
    check_type(got, tuple, f"{call} 的返回值")
    check_equal(len(got), 3, f"{call} 返回的 tuple 的长度（sorted_ids, expert_ids, num_tokens_post_padded）")
    sorted_ids, expert_ids, used = got
    check_int_list(sorted_ids, f"{call} 返回的 sorted_ids")
    check_int_list(expert_ids, f"{call} 返回的 expert_ids")
    check_type(used, int, f"{call} 返回的 num_tokens_post_padded")
    if not held == rows:  # 一次比较；不一样时再逐行取回来，好指出哪里被改了
        after = [held[i] for i in range(len(held))]
        check_equal(after, rows, f"{call} 之后的 topk_ids（不该改动参数）")
    return (sorted_ids, expert_ids, used), call


def check_case(mod, rows, block, experts, kind) -> None:
    got, call = call_checked(mod, rows, block, experts, kind)
    want = ref_align(rows, block, experts)
    pairs = len(rows) * len(rows[0])
    capacity = len(want[0])
    if len(got[0]) != capacity:
        raise CheckFailed(
            f"{call} 返回的 sorted_ids 的长度不对：应该是 padded_capacity({pairs}, {experts}, {block}) = {capacity}"
            f"（只取决于形状），你的是 {len(got[0])}（这次实际用到 {want[2]} 行）"
            + hints(got, want, rows, block, experts, "len_sorted"))
    check_equal(got[0], want[0], f"{call} 返回的 sorted_ids", f"pairs = M·k = {pairs}，空行填 {pairs}"
                + hints(got, want, rows, block, experts, "sorted"))
    if len(got[1]) != len(want[1]):
        raise CheckFailed(
            f"{call} 返回的 expert_ids 的长度不对：应该每块一项，{capacity} 行 / block_size {block} = {len(want[1])} 项，"
            f"你的是 {len(got[1])} 项" + hints(got, want, rows, block, experts, "len_experts"))
    check_equal(got[1], want[1], f"{call} 返回的 expert_ids", "每块一项：这一块的行属于哪个专家，没用到的块是 -1"
                + hints(got, want, rows, block, experts, "experts"))
    check_equal(got[2], want[2], f"{call} 返回的 num_tokens_post_padded",
                "每个专家的格子数向上取整到 block_size 的倍数，再加起来" + hints(got, want, rows, block, experts, "used"))


def check_fixed_length(mod, rng: random.Random, M, k, experts, block) -> None:
    """同样的形状、两种路由：缓冲区一样长（CUDA 图和 torch.compile 都按形状录）。"""
    first = [list(range(k)) for _ in range(M)]  # 所有 token 都挑专家 0..k-1
    second = random_routing(rng, M, k, experts, rng.choice(["uniform", "hot"]))
    a, _ = call_checked(mod, first, block, experts, "所有 token 挑同几个专家")
    b, _ = call_checked(mod, second, block, experts, "另一种路由")
    shape = f"M={M}, k={k}, num_experts={experts}, block_size={block}"
    for name, i in (("sorted_ids", 0), ("expert_ids", 1)):
        if len(a[i]) != len(b[i]):
            want = ref_align(first, block, experts)
            raise CheckFailed(
                f"同样的形状（{shape}）换一种路由，{name} 的长度从 {len(a[i])} 变成了 {len(b[i])}：缓冲区的长度只能取决于"
                f"形状（CUDA 图、torch.compile 都按形状录），这两次都应该是 {len(want[i])}。\n"
                f"  第一种路由：topk_ids={short(first, 100)}\n  第二种路由：topk_ids={short(second, 100)}"
                + hints(a, want, first, block, experts, "len_sorted" if i == 0 else "len_experts"))


def check_capacity(mod, rng: random.Random) -> None:
    cases = [(8, 4, 2), (0, 3, 1), (0, 5, 4), (1, 1, 64), (6, 2, 3), (48, 16, 16)]
    cases += [(rng.randint(0, 1000), rng.randint(1, 64), rng.choice(BLOCKS + (rng.randint(1, 300),)))
              for _ in range(60)]
    for pairs, experts, block in cases:
        call = f"padded_capacity({pairs}, {experts}, {block})"
        got = mod.padded_capacity(pairs, experts, block)
        check_type(got, int, f"{call} 的返回值")
        want = ref_capacity(pairs, experts, block)
        if got == want:
            continue
        hits = []
        if got == pairs + experts * (block - 1):
            hits.append("没有向上取整到 block_size 的倍数：缓冲区要切成整块")
        if got == -(-pairs // block) * block:
            hits.append("只把 num_pairs 取整到了整块：每个专家最多还要补 block_size − 1 行")
        if got == -(-(pairs + experts * block) // block) * block:
            hits.append("每个专家按多补 block_size 行算了：最多只差 block_size − 1 行就凑满一块")
        raise CheckFailed(f"{call} 不对：应该是 {pairs} + {experts}·({block} − 1) = {pairs + experts * (block - 1)}，"
                          f"向上取整到 {block} 的倍数 = {want}，你的是 {got!r}" + mistake_hint(hits))


def check_bad_arguments(mod, rng: random.Random) -> None:
    good = dict(num_pairs=rng.randint(0, 200), num_experts=rng.randint(1, 16), block_size=rng.choice(BLOCKS))
    for key, below in (("num_pairs", 0), ("num_experts", 1), ("block_size", 1)):
        # 每个界都查：就在边界上、远一些（bad_int 随机挑），再加不是整数的（float、bool）
        probe_bad_arguments(mod.padded_capacity, good, {key: lambda r, b=below: bad_int(r, b)}, rng,
                            name="padded_capacity", tries=2)
        for not_int in (float(below + 2), True):
            probe_bad_arguments(mod.padded_capacity, good, {key: [not_int]}, rng, name="padded_capacity", tries=1)

    experts = rng.randint(2, 16)
    M, k, block = rng.randint(3, 12), rng.randint(1, experts), rng.choice(BLOCKS)  # 至少 3 行：开头、中间、末尾都有
    rows = random_routing(rng, M, k, experts, "uniform")
    good = dict(topk_ids=rows, block_size=block, num_experts=experts)

    bad_ids = [  # 每种坏值都试两次（值随机），位置在开头、中间、末尾轮流
        ("太大", lambda old, r: r.choice([experts, experts + r.randint(1, 100)])),
        ("小于 -1", lambda old, r: bad_int(r, -1)),
        ("bool", lambda old, r: r.choice([True, False])),
        ("float", lambda old, r: float(max(old, 0))),
        ("None", lambda old, r: None),
    ]

    def bad_length(old, r):
        return old + [r.randrange(experts)] if len(old) == 1 or r.random() < 0.5 else old[:-1]

    kinds = [
        ("block_size", lambda r: bad_int(r, 1)), ("block_size", lambda r: float(r.choice(BLOCKS))),
        ("num_experts", lambda r: bad_int(r, 1)), ("num_experts", lambda r: float(experts)),
        ("topk_ids", lambda r: []), ("topk_ids", lambda r: [[] for _ in rows]),  # 没有行；每行都是空的（k = 0）
    ]
    kinds += [("topk_ids", lambda r: with_bad_item(r, rows, lambda old, r: []))] * 3  # 有一行是空的
    kinds += [("topk_ids", lambda r: with_bad_item(r, rows, bad_length))] * 3  # 有一行长度不一样
    for key, spoil in kinds:
        probe_bad_arguments(mod.align_blocks, good, {key: spoil}, rng, name="align_blocks", tries=1)
    for what, spoil in bad_ids * 2:
        bad = with_bad_item(rng, rows, lambda row, r: with_bad_item(r, row, spoil))
        check_raises(ValueError, mod.align_blocks, bad, block, experts,
                     what=f"align_blocks({short(bad, 100)}, {block}, {experts})"
                          f"（有一项{what}：专家编号要是 [-1, {experts}) 里的整数）")
    # 专家编号比 num_experts 大：同样的 topk_ids，num_experts 给小了
    top = max(max(row) for row in rows)
    if top >= 1:
        check_raises(ValueError, mod.align_blocks, rows, block, top,
                     what=f"align_blocks({short(rows, 100)}, {block}, {top})（专家编号 {top} 不在 [-1, {top}) 里）")


def run(mod: object) -> None:
    for name in ("padded_capacity", "align_blocks"):
        require(mod, name)
    rng = random.Random(SEED)
    check_capacity(mod, rng)
    example = [[2, 0], [0, -1], [2, 3], [0, 2]]
    check_case(mod, example, 2, 4, "题面里的例子")
    check_case(mod, [[0, 1], [1, 0], [0, 1], [1, 0]], 2, 4, "题面里的例子：同样的形状、另一种路由")
    edges = [([[-1]], 1, 1, "唯一的格子是 -1"), ([[0]], 64, 1, "一个格子、一块 64 行"),
             ([[-1, -1], [-1, -1]], 4, 3, "全是 -1"), ([[0] * 5 for _ in range(3)], 4, 1, "只有一个专家"),
             ([[3, 2, 1, 0]], 3, 4, "每个专家一个格子：上界正好用满")]
    for rows, block, experts, kind in edges:
        check_case(mod, rows, block, experts, kind)
    for _ in range(150):
        M, k, experts, block = random_shape(rng)
        kind = rng.choice(["uniform", "uniform", "skewed", "hot", "repeat"])
        check_case(mod, random_routing(rng, M, k, experts, kind), block, experts, kind)
    for _ in range(20):
        experts, block = rng.randint(1, 16), rng.choice(BLOCKS[:5])
        check_case(mod, worst_routing(rng, block, experts), block, experts, "每个专家整块再多一个格子：上界正好用满")
    for _ in range(20):
        check_fixed_length(mod, rng, *random_shape(rng))
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
