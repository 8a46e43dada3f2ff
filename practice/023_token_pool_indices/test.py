"""练习 023 的评测：题目里的例子、几百组随机的批和参考实现比较，再用你的下标驱动一个小的生成循环，
检查每一步从 token 池取到的输入都是请求真实的 token 序列。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_tensor, main, require, short, seed

import torch

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

# ---------------------------------------------------------------------------
# 参考实现：逐个 token 列出来
# ---------------------------------------------------------------------------


def ref_input(reqs):
    rows, positions = [], []
    for table_idx, cached, device, _ in reqs:
        for pos in range(cached, device):
            rows.append(table_idx)
            positions.append(pos)
    return rows, positions


def ref_write(reqs):
    rows = [r[0] for r in reqs]
    cols = [device if device + 1 < max_device else -1 for _, _, device, max_device in reqs]
    return rows, cols


def as_pair(result, what: str, n: int):
    check(
        isinstance(result, tuple) and len(result) == 2,
        f"{what} 应该返回两个张量组成的 tuple，你返回的是 {short(result)}",
    )
    a, b = result
    check_tensor(a, f"{what} 返回的第一个张量", shape=(n,), dtype=torch.int64)
    check_tensor(b, f"{what} 返回的第二个张量", shape=(n,), dtype=torch.int64)
    return a.tolist(), b.tolist()


def check_input(mod, reqs) -> None:
    call = f"input_indices({short(reqs, 200)})"
    want_rows, want_pos = ref_input(reqs)
    rows, positions = as_pair(mod.input_indices(list(reqs)), call, len(want_rows))
    check_equal(rows, want_rows, f"{call} 的 rows（每个 token 所在的行）")
    hint = ""
    if positions == [p for _, c, d, _ in reqs for p in range(0, d - c)] and positions != want_pos:
        hint = "看起来：位置从 0 数了；前 cached_len 个 token 已经在 KV 池里，这一步从 cached_len 开始"
    check_equal(positions, want_pos, f"{call} 的 positions（每个 token 在序列里的位置）", hint)


def check_write(mod, reqs) -> None:
    call = f"write_indices({short(reqs, 200)})"
    want_rows, want_cols = ref_write(reqs)
    rows, cols = as_pair(mod.write_indices(list(reqs)), call, len(reqs))
    check_equal(rows, want_rows, f"{call} 的 rows（每个请求的行）")
    hint = ""
    if cols == [d - 1 for _, _, d, _ in reqs]:
        hint = "看起来：写在了 device_len - 1，那是这一步最后一个输入 token 的位置，会把它覆盖掉；新 token 在 device_len"
    elif cols == [d for _, _, d, _ in reqs]:
        hint = "看起来：这一步已是最后一个 token 的请求（device_len + 1 == max_device_len）也写在了 device_len；它要写到 -1"
    check_equal(cols, want_cols, f"{call} 的 cols（新 token 写回的位置）", hint)


def check_examples(mod) -> None:
    reqs = [(2, 0, 3, 6), (0, 5, 6, 7)]
    check_input(mod, reqs)
    check_write(mod, reqs)
    for name in ("input_indices", "write_indices"):
        as_pair(getattr(mod, name)([]), f"{name}([])（空的批）", 0)


def random_batch(rng: random.Random, width: int = 40):
    n = rng.randint(1, 6)
    rows = rng.sample(range(8), n)
    reqs = []
    for row in rows:
        max_device = rng.randint(2, width)
        device = rng.randint(1, max_device - 1)
        cached = rng.choice([0, device - 1, rng.randint(0, device - 1)])
        reqs.append((row, cached, device, max_device))
    return reqs


# ---------------------------------------------------------------------------
# 小的生成循环：prefill 优先、连续批处理，行被新请求复用；假模型像 KV 缓存一样记着每行见过的 token
# ---------------------------------------------------------------------------


def fake_next(seen: list[int], vocab: int) -> int:
    h = 7
    for t in seen:
        h = (h * 1_000_003 + t + 1) % (2**31 - 1)
    return h % vocab


def run_loop(mod, rng: random.Random) -> None:
    width, num_rows, vocab = 16, 3, 97
    pool = torch.full((num_rows + 1, width), -5, dtype=torch.int64)  # -5：没写过的位置
    queue = []
    for uid in range(rng.randint(3, 8)):
        prompt_len = rng.randint(1, 10)
        max_tokens = rng.choice([1, 2, rng.randint(1, width - prompt_len), width - prompt_len])
        queue.append((uid, [rng.randrange(vocab) for _ in range(prompt_len)], max_tokens))
    context = "小循环：" + short([(u, len(p), m) for u, p, m in queue], 200) + "（uid, 提示长度, max_tokens），token 池宽 16"
    free_rows = list(range(num_rows))
    running = []  # 每个是 dict：uid, row, cached, device, max_device, truth（CPU 上的真实序列）, seen
    for step in range(1, 200):
        if not queue and not running:
            return
        if queue and free_rows:  # prefill 优先
            batch = []
            while queue and free_rows:
                uid, prompt, max_tokens = queue.pop(0)
                row = free_rows.pop(0)
                pool[row, : len(prompt)] = torch.tensor(prompt)
                batch.append(dict(uid=uid, row=row, cached=0, device=len(prompt),
                                  max_device=len(prompt) + max_tokens, truth=list(prompt), seen=[]))
            running += batch
        else:
            batch = list(running)
        reqs = [(r["row"], r["cached"], r["device"], r["max_device"]) for r in batch]
        rows, positions = mod.input_indices(reqs)
        w_rows, w_cols = mod.write_indices(reqs)
        input_ids = pool[rows, positions].tolist()
        next_tokens, k = [], 0
        for r in batch:
            n = r["device"] - r["cached"]
            got, want = input_ids[k : k + n], r["truth"][r["cached"] : r["device"]]
            k += n
            if got != want:
                lines = [f"{context}\n  第 {step} 步，请求 {r['uid']}（第 {r['row']} 行，位置 [{r['cached']}, {r['device']})）"
                         f"从 token 池取到的输入是 {short(got)}，它真实的 token 是 {short(want)}"]
                if -5 in got:
                    lines.append("  读到了从没写过的位置（-5）：上一步的新 token 没写到它该在的地方")
                check(False, "\n".join(lines))
            r["seen"] += got
            next_tokens.append(fake_next(r["seen"], vocab))
        try:
            pool[w_rows, w_cols] = torch.tensor(next_tokens)
        except IndexError as e:
            check(False, f"{context}\n  第 {step} 步把新 token 写回 token 池时越界（{e}）：写回下标 "
                         f"{short(list(zip(w_rows.tolist(), w_cols.tolist())))}")
        for r, token in zip(batch, next_tokens):  # complete_one + append_host
            r["cached"], r["device"] = r["device"], r["device"] + 1
            r["truth"].append(token)
        for r in [r for r in running if r["device"] == r["max_device"]]:
            running.remove(r)
            free_rows.append(r["row"])
    check(False, f"{context}：200 步还没跑完")


def run(mod: object) -> None:
    require(mod, "input_indices")
    require(mod, "write_indices")
    check_examples(mod)
    rng = random.Random(SEED)
    for _ in range(300):
        reqs = random_batch(rng)
        check_input(mod, reqs)
        check_write(mod, reqs)
    for _ in range(40):
        run_loop(mod, rng)


if __name__ == "__main__":
    main(run)
