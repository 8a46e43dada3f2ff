"""练习 053 的评测：随机批次（decode、prefill、缓存前缀、0 个 query 的请求，B 从 1 到几百），
逐项和逐个 token 走一遍的参考比较；数 torch 运算的次数，查有没有把数取回 Python。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    check,
    check_equal,
    check_raises,
    check_tensor,
    check_type,
    main,
    mistake_hint,
    require,
    seed,
    torch_calls,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
TO_PYTHON = {"tolist", "item", "numpy", "__float__", "__int__", "__index__", "__bool__", "__array__", "nonzero"}


def ref(lens_q: list[int], lens_k: list[int]) -> tuple[list[int], list[int]]:
    """逐个 token 走一遍：第 b 个请求的第 i 个 query 看得见 n_k - n_q + i + 1 个 key。"""
    owner, visible = [], []
    for b, (n_q, n_k) in enumerate(zip(lens_q, lens_k)):
        for i in range(n_q):
            owner.append(b)
            visible.append(n_k - n_q + i + 1)
    return owner, visible


def make_batch(rng: random.Random, B: int):
    kind = rng.choice(["decode", "prefill", "mixed"])
    lens_q, lens_k = [], []
    for _ in range(B):
        if kind == "decode":
            n_q = 1
        else:
            n_q = rng.choice([0, 1, rng.randint(1, 12), rng.randint(1, 40)])
        cached = rng.choice([0, 0, rng.randint(1, 30)])
        lens_q.append(n_q)
        lens_k.append(cached + n_q if n_q or cached else rng.randint(0, 5))
    indptr = [0]
    for n in lens_q:
        indptr.append(indptr[-1] + n)
    return lens_q, lens_k, torch.tensor(indptr, dtype=torch.int32), torch.tensor(lens_k, dtype=torch.int32)


def guess(owner, visible, lens_q, lens_k) -> str:
    hits = []
    want_owner, want_visible = ref(lens_q, lens_k)
    if owner == want_owner and visible == [v - 1 for v in want_visible]:
        hits.append("少了 1：第 i 个 query 自己也是一个 key，看得见前 n_k − n_q + i + 1 个")
    top_left = [i + 1 for n_q in lens_q for i in range(n_q)]
    if owner == want_owner and visible == top_left and top_left != want_visible:
        hits.append("掩码左上对齐了（第 i 个 query 只看前 i + 1 个 key）：有缓存前缀时 query 是序列的最后几个 token")
    if owner != want_owner and 0 in lens_q:
        hits.append("有 0 个 query 的请求时 owner 错了：它的起点和下一个请求相同，searchsorted 要 right=True")
    return mistake_hint(hits)


def check_batch(mod, lens_q, lens_k, qo_indptr, seq_lens_k) -> list[str]:
    T = sum(lens_q)
    inputs = (qo_indptr.clone(), seq_lens_k.clone())
    call = f"token_owner_and_visible(qo_indptr={qo_indptr.tolist()[:12]}…, seq_lens_k={seq_lens_k.tolist()[:12]}…, num_tokens={T})"
    got, names = torch_calls(mod.token_owner_and_visible, qo_indptr, seq_lens_k, T)
    check_type(got, tuple, f"{call} 的返回值")
    check(len(got) == 2, f"{call} 应该返回 (owner, visible)")
    owner, visible = got
    check_tensor(owner, f"{call} 的 owner", shape=(T,), dtype=torch.int64)
    check_tensor(visible, f"{call} 的 visible", shape=(T,), dtype=torch.int64)
    check(torch.equal(qo_indptr, inputs[0]) and torch.equal(seq_lens_k, inputs[1]), f"{call} 改动了传进来的张量")
    want_owner, want_visible = ref(lens_q, lens_k)
    hint = guess(owner.tolist(), visible.tolist(), lens_q, lens_k)
    check_equal(owner.tolist(), want_owner, f"{call} 的 owner", f"每个请求的 query 数 {lens_q}" + hint)
    check_equal(visible.tolist(), want_visible, f"{call} 的 visible",
                f"每个请求的 query 数 {lens_q}，key 数 {lens_k}" + hint)
    return names


def check_meta(mod, lens_q, lens_k, qo_indptr, seq_lens_k) -> None:
    """meta 设备上的张量只有形状、没有数据：取数（不管用什么办法）、按数据决定形状的运算在这里都会报错。
    整批用张量运算、不碰数据的写法照样能跑，返回值也在 meta 上——和在 GPU 上不等 GPU 是一回事。"""
    T = sum(lens_q)
    call = f"token_owner_and_visible(meta 设备上的 qo_indptr [{len(lens_q) + 1}]、seq_lens_k [{len(lens_k)}], num_tokens={T})"
    try:
        got = mod.token_owner_and_visible(qo_indptr.to("meta"), seq_lens_k.to("meta"), T)
    except NotImplementedError as e:
        if "meta" not in str(e).lower() and "Cannot" not in str(e):
            raise
        got = e
    except Exception as e:  # noqa: BLE001 - 换成中文说明
        got = e
    check(not isinstance(got, BaseException),
          f"{call} 出错了：{type(got).__name__}: {str(got).splitlines()[0] if str(got) else ''}\n"
          "  meta 张量没有数据：这说明你的写法要读张量里的数（tolist、item、int(...)、repr、按布尔掩码取、"
          "不给 output_size 的 repeat_interleave……）。GPU 上这些都要等 GPU 算完，图也录不下来")
    check_type(got, tuple, f"{call} 的返回值")
    check(len(got) == 2, f"{call} 应该返回 (owner, visible)")
    for name, t in zip(("owner", "visible"), got):
        check_tensor(t, f"{call} 的 {name}", shape=(T,), dtype=torch.int64)
        check(t.device.type == "meta", f"{call} 的 {name} 在 {t.device} 上：返回值要和输入在同一个设备上")


def run(mod: object) -> None:
    require(mod, "token_owner_and_visible")
    rng = random.Random(SEED)
    # 题面里的例子：owner = [0, 0, 0, 2]，visible = [3, 4, 5, 9]
    check_batch(mod, [3, 0, 1], [5, 2, 9], torch.tensor([0, 3, 3, 4], dtype=torch.int32),
                torch.tensor([5, 2, 9], dtype=torch.int32))
    for _ in range(60):
        check_batch(mod, *make_batch(rng, rng.randint(1, 8)))
    small = check_batch(mod, *make_batch(rng, rng.randint(1, 3)))
    big = check_batch(mod, *make_batch(rng, rng.randint(300, 500)))
    pulled = sorted(TO_PYTHON.intersection(small + big))
    check(not pulled, f"token_owner_and_visible 用了 {', '.join(pulled)}：把张量里的数取回了 Python。"
          "GPU 上每取一次都要等 GPU 算完，第 18 章的图也录不下来：用 searchsorted、按下标取这类张量运算整批算")
    check(len(big) <= len(small) + 2, f"token_owner_and_visible 做的 torch 运算次数随批大小增长：几个请求时 "
          f"{len(small)} 次，几百个请求时 {len(big)} 次。要整批一次算，不逐个请求、逐个 token 循环")
    check_meta(mod, *make_batch(rng, rng.randint(2, 8)))
    bad = [((torch.zeros(2, 3, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), 0), "qo_indptr 是二维的"),
           ((torch.zeros(4, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), 0), "长度对不上"),
           ((torch.zeros(3, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), -rng.randint(1, 9)), "num_tokens 是负数")]
    for args, why in bad:
        check_raises(ValueError, mod.token_owner_and_visible, *args, what=f"token_owner_and_visible（{why}）")


if __name__ == "__main__":
    main(run)
