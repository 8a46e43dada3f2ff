"""练习 034 的评测：一个假的异步引擎检查每一次 launch / result（行有没有在在途时被别人拿走、
结束之后还发不发、发出次数有没有超过 max_tokens），再把发出的批、launch / result 的先后和输出
与一份独立写的参考实现逐项比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_int_list, check_raises, check_type, main, require, short, seed, bad_int, probe_bad_arguments, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
MAX_LAUNCHES = 3000


def token_for(salt: int, rid: int, k: int, vocab: int, eos_id: int | None) -> int:
    """请求 rid 第 k 次被发出时算出的 token：确定性的，有一定概率是 eos。"""
    rng = random.Random(salt * 1_000_003 + rid * 7919 + k)
    if eos_id is not None and rng.random() < 0.25:
        return eos_id
    return rng.randrange(vocab)


class FakeHandle:
    def __init__(self, engine: "FakeEngine", index: int, batch, tokens) -> None:
        self.engine, self.index, self.batch, self.tokens = engine, index, batch, tokens
        self.taken = False

    def result(self) -> list[int]:
        e = self.engine
        check(not self.taken, f"{e.context}：第 {self.index + 1} 批的 result() 取了两次：每个句柄只能取一次")
        self.taken = True
        e.log.append(("result", self.index))
        for (rid, _), token in zip(self.batch, self.tokens):
            if rid in e.known_finished:
                continue
            e.delivered[rid] += 1
            if e.delivered[rid] == e.max_tokens[rid] or token == e.eos_id:
                e.known_finished.add(rid)
        return list(self.tokens)


class FakeEngine:
    def __init__(self, n, max_tokens, num_rows, eos_id, vocab, salt, strict=True) -> None:
        self.n, self.max_tokens, self.num_rows = n, max_tokens, num_rows
        self.eos_id, self.vocab, self.salt, self.strict = eos_id, vocab, salt, strict
        self.context = (f"overlap_generate({n} 个请求, max_tokens={max_tokens}, num_rows={num_rows}, "
                        f"eos_id={eos_id})")
        self.log: list[tuple] = []
        self.handles: list[FakeHandle] = []
        self.launches = [0] * n
        self.delivered = [0] * n  # 已经交给调用者（result 取走、且当时请求还没结束）的 token 数
        self.known_finished: set[int] = set()  # 调用者已经能知道结束了的请求
        self.row_of: dict[int, int] = {}

    def launch(self, batch):
        k = len(self.handles) + 1
        where = f"{self.context}\n  第 {k} 次 launch"
        check(k <= MAX_LAUNCHES, f"{self.context}：launch 已经调用了 {MAX_LAUNCHES} 次，循环是不是停不下来？")
        check_type(batch, list, f"第 {k} 次 launch 的 batch")
        check(batch, f"{where}：batch 是空的，没有可发的就不要 launch")
        items = []
        for j, item in enumerate(batch):
            check(isinstance(item, (tuple, list)) and len(item) == 2,
                  f"{where}：batch 的第 {j} 项应该是 (req_id, row)，你给的是 {short(item)}")
            rid, row = item
            check_type(rid, int, f"第 {k} 次 launch 第 {j} 项的 req_id")
            check_type(row, int, f"第 {k} 次 launch 第 {j} 项的 row")
            check(0 <= rid < self.n, f"{where}：没有 req_id = {rid} 这个请求")
            check(0 <= row < self.num_rows, f"{where}：没有第 {row} 行（一共 {self.num_rows} 行）")
            items.append((rid, row))
        rids = [r for r, _ in items]
        check(len(set(rids)) == len(rids), f"{where}：同一个请求在一批里出现了两次：{rids}")
        rows = [w for _, w in items]
        check(len(set(rows)) == len(rows), f"{where}：同一行在一批里给了两个请求：{short(items)}")
        if self.strict:
            for rid, row in items:
                check(rid not in self.known_finished,
                      f"{where}：请求 {rid} 已经结束（它的结果你已经取到了），不该再发出它")
                check(self.launches[rid] < self.max_tokens[rid],
                      f"{where}：请求 {rid} 已经发出了 max_tokens={self.max_tokens[rid]} 次，"
                      f"再发就多算了一个 token")
                owner = self.row_of.get(rid)
                check(owner is None or owner == row,
                      f"{where}：请求 {rid} 原来在第 {owner} 行，现在换成了第 {row} 行")
                for h in self.handles:
                    if h.taken:
                        continue
                    for other, other_row in h.batch:
                        check(not (other_row == row and other != rid),
                              f"{where}：第 {row} 行给了请求 {rid}，可第 {h.index + 1} 批还没做完（没取结果），"
                              f"它还在往这一行写请求 {other} 的 token：行要等包含旧请求的最后一批做完才能还")
        tokens = []
        for rid, row in items:
            self.launches[rid] += 1
            self.row_of[rid] = row
            tokens.append(token_for(self.salt, rid, self.launches[rid], self.vocab, self.eos_id))
        handle = FakeHandle(self, len(self.handles), items, tokens)
        self.handles.append(handle)
        self.log.append(("launch", items))
        return handle


def reference(n, max_tokens, num_rows, engine):
    """独立写的参考：状态放在一个 dict 里，一步一步照题面做。"""
    state = {i: {"out": [], "sent": 0, "row": None, "done": False, "held": False} for i in range(n)}
    queue, order, free = list(range(n)), [], list(range(num_rows))
    previous = None
    while True:
        batch = [(i, state[i]["row"]) for i in order if state[i]["sent"] < max_tokens[i]]
        while queue and free:
            i = queue.pop(0)
            free.sort()
            state[i]["row"], state[i]["held"] = free.pop(0), True
            order.append(i)
            batch.append((i, state[i]["row"]))
        now = None
        if batch:
            now = (batch, engine.launch(batch))
            for i, _ in batch:
                state[i]["sent"] += 1
        if previous is not None:
            for (i, _), t in zip(previous[0], previous[1].result()):
                s = state[i]
                if s["done"]:
                    continue
                s["out"].append(t)
                if len(s["out"]) == max_tokens[i] or t == engine.eos_id:
                    s["done"] = True
                    order.remove(i)
        busy = {i for i, _ in now[0]} if now else set()
        for i in range(n):
            s = state[i]
            if s["done"] and s["held"] and i not in busy:
                s["held"] = False
                free.append(s["row"])
        previous = now
        if not queue and not order and previous is None:
            return [state[i]["out"] for i in range(n)]


def output_hint(mine: list[int], ref: list[int]) -> str:
    if mine == ref[:-1]:
        return "\n  少了最后一个：结束要按拿到的 token 数判断，不能按发出的次数（发出的已经多一个了）"
    if mine[: len(ref)] == ref and len(mine) > len(ref):
        return "\n  多了：请求结束之后，它在已经发出的那一批里的 token 要丢掉"
    return ""


def describe_event(event) -> str:
    kind, what = event
    return f"launch {short(what, 90)}" if kind == "launch" else f"取第 {what + 1} 批的 result()"


def check_run(overlap_generate, n, max_tokens, num_rows, eos_id, vocab, salt) -> None:
    prompts = [[1 + i] * (1 + i % 3) for i in range(n)]
    engine = FakeEngine(n, max_tokens, num_rows, eos_id, vocab, salt)
    context = engine.context
    got = overlap_generate(prompts, list(max_tokens), engine, num_rows, eos_id)
    ref_engine = FakeEngine(n, max_tokens, num_rows, eos_id, vocab, salt)
    want = reference(n, max_tokens, num_rows, ref_engine)
    check_type(got, list, f"{context} 的返回值")
    check_equal(len(got), n, "返回的列表长度（每个请求一项）", context)
    for i, out in enumerate(got):
        check_int_list(out, f"outputs[{i}]")
    for step, (mine, ref) in enumerate(zip(engine.log, ref_engine.log)):
        if mine != ref:
            check(False, f"{context}\n  第 {step + 1} 个动作不对：应该是 {describe_event(ref)}，你的是 "
                         f"{describe_event(mine)}\n  （每步先拼批、launch，再取上一批的结果；"
                         f"拼批时在跑的请求在前，新接纳的拿编号最小的空行）")
    check_equal(len(engine.log), len(ref_engine.log), "launch 和 result 的总次数", context)
    check_equal(engine.launches, ref_engine.launches, "每个请求被发出的次数", context)
    for i, (mine, ref) in enumerate(zip(got, want)):
        check_equal(mine, ref, f"outputs[{i}]", context + output_hint(mine, ref))
    pending = [h.index + 1 for h in engine.handles if not h.taken]
    check(not pending, f"{context}：第 {pending} 批发出之后一直没取结果")


def check_example(overlap_generate) -> None:
    class Script:
        eos_id = 99

        def __init__(self):
            self.log = []

        def launch(self, batch):
            self.log.append([tuple(x) for x in batch])
            step = len(self.log)
            tokens = {1: [5], 2: [99], 3: [7], 4: [8], 5: [9]}.get(step)
            check(tokens is not None and len(tokens) == len(batch),
                  f"题目里的例子：第 {step} 次 launch 的批是 {short(batch)}，和题面的时间线对不上")

            class H:
                def result(self_inner):
                    return list(tokens)
            return H()

    script = Script()
    got = overlap_generate([[1], [2]], [3, 2], script, 1, 99)
    want = [[(0, 0)], [(0, 0)], [(0, 0)], [(1, 0)]]
    check(script.log[:4] == want,
          f"题目里的例子：前 4 次 launch 的批应该是 {want}，你的是 {script.log[:4]}\n"
          f"  （每步先拼批、launch，再取上一批的结果；请求 0 结束时还在第 3 批里，行 0 要等第 3 批做完才还）")
    check_type(got, list, "题目里的例子：返回值")
    for i, (mine, ref) in enumerate(zip(got, [[5, 99], [8, 9]])):
        check_int_list(mine, f"题目里的例子：outputs[{i}]")
        check(mine == ref, f"题目里的例子：outputs[{i}] 应该是 {ref}，你的是 {short(mine)}"
                           f"{output_hint(mine, ref)}")
    check_equal(len(got), 2, "题目里的例子：返回的列表长度")


def check_bad_arguments(overlap_generate) -> None:
    class Never:
        def launch(self, batch):
            check(False, f"参数不对时应该在 launch 之前就抛 ValueError，你却发出了 {short(batch)}")

    for args, why in [(([[1], [2]], [2], Never(), 1), "max_tokens 只有 1 个"),
                      (([[1], [2]], [2, 0], Never(), 1), "有一个 max_tokens 是 0"),
                      (([[1]], [2], Never(), 0), "num_rows 是 0")]:
        check_raises(ValueError, overlap_generate, *args, what=f"overlap_generate(...)（{why}）")
    check_equal(overlap_generate([], [], Never(), 2), [], "overlap_generate([], [], engine, 2)")
    # 坏的那一个在随机的位置、是随机的坏值：只查第一个 max_tokens、只认 0 的代码过不去
    rng = random.Random(SEED + 1)
    n = rng.randint(3, 8)
    prompts, max_tokens = [[i] for i in range(n)], [rng.randint(1, 9) for _ in range(n)]
    probe_bad_arguments(
        lambda prompts, max_tokens, num_rows: overlap_generate(prompts, max_tokens, Never(), num_rows),
        dict(prompts=prompts, max_tokens=max_tokens, num_rows=rng.randint(1, 4)),
        dict(num_rows=lambda r: bad_int(r, 1),
             max_tokens=lambda r: r.choice([lambda r: with_bad_item(r, max_tokens, lambda m, r: bad_int(r, 1)),
                                            lambda r: max_tokens[: r.randrange(n)],
                                            lambda r: max_tokens + [1] * r.randint(1, 3)])(r)),
        rng, name="overlap_generate", tries=40)


def run(mod: object) -> None:
    overlap_generate = require(mod, "overlap_generate")
    check_example(overlap_generate)
    rng = random.Random(SEED)
    for _ in range(200):
        n = rng.randint(1, 9)
        max_tokens = [rng.choice([1, 2, rng.randint(1, 10)]) for _ in range(n)]
        num_rows = rng.randint(1, 4)
        vocab = rng.randint(3, 30)
        eos_id = rng.choice([None, rng.randrange(vocab)])
        check_run(overlap_generate, n, max_tokens, num_rows, eos_id, vocab, rng.randrange(2**31))
    check_bad_arguments(overlap_generate)


if __name__ == "__main__":
    main(run)
