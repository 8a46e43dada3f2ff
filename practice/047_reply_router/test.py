"""练习 047 的评测：几十个并发的等待者，回复随机交错地送到；有的中途取消；最后后端"死掉"。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_equal, check_type, main, require, short

SEED = 2047
WORDS = ["巴黎", " is", " the", "。", "😀", "", " capital", "\n", "of", " France"]
HANG = 2.0  # 秒：等这么久还没醒，就判"挂住了"


async def _wait(coro, what: str):
    try:
        return await asyncio.wait_for(coro, HANG)
    except asyncio.TimeoutError:
        raise CheckFailed(f"{what}：{HANG} 秒还没有返回，挂住了") from None


async def example(ReplyRouter, BackendGone) -> None:
    r = ReplyRouter()
    a, b = r.open(), r.open()
    check_equal((a, b), (0, 1), "前两次 open() 返回的 uid")
    r.deliver(b, "你好", False)
    r.deliver(a, "Hi", True)
    check_equal(await _wait(r.next(a), "next(a)"), ("Hi", True), "题目例子里 next(a)")
    check_equal(await _wait(r.next(b), "next(b)"), ("你好", False), "题目例子里 next(b)")
    check_equal(r.open_uids, {b}, "a 结束之后的 open_uids")
    r.fail("调度器退出了")
    try:
        await _wait(r.next(b), "fail 之后的 next(b)")
    except BackendGone:
        pass
    else:
        raise CheckFailed("fail 之后 next(b) 应当抛 BackendGone")
    check_equal(r.open_uids, set(), "题目例子最后的 open_uids")


async def traffic(ReplyRouter, rng: random.Random) -> None:
    """很多个请求并发：每个等待者应当正好拿到自己的回复，顺序不乱。"""
    r = ReplyRouter()
    n = rng.randint(1, 40)
    uids = [r.open() for _ in range(n)]
    check_equal(uids, list(range(n)), f"连续 {n} 次 open() 返回的 uid")
    check_type(r.open_uids, set, "open_uids")
    check_equal(r.open_uids, set(uids), "全部登记之后的 open_uids")
    scripts = {u: [(rng.choice(WORDS) + f"#{u}.{i}", False) for i in range(rng.randint(0, 6))] for u in uids}
    for u in uids:
        scripts[u].append((f"完#{u}", True))
    quitters = {u: rng.randint(0, len(scripts[u]) - 1) for u in uids if rng.random() < 0.25}
    got: dict[int, list] = {u: [] for u in uids}
    aborted: dict[int, bool] = {}

    async def consumer(u: int) -> None:
        while True:
            if u in quitters and len(got[u]) == quitters[u]:
                aborted[u] = r.abort(u)
                return
            piece = await r.next(u)
            got[u].append(piece)
            if piece[1]:
                return

    async def producer() -> None:
        pending = {u: list(s) for u, s in scripts.items()}
        while any(pending.values()):
            u = rng.choice([u for u, s in pending.items() if s])
            r.deliver(u, *pending[u].pop(0))
            if rng.random() < 0.2:
                r.deliver(n + rng.randint(0, 9), "不存在的 uid", rng.random() < 0.5)
            if rng.random() < 0.5:
                await asyncio.sleep(0)

    tasks = [asyncio.ensure_future(consumer(u)) for u in uids]
    await producer()
    await _wait(asyncio.gather(*tasks), f"{n} 个等待者收完各自的回复")
    for u in uids:
        want = scripts[u][: quitters[u]] if u in quitters else scripts[u]
        check(got[u] == want, f"uid {u} 拿到的回复不对：应该是 {short(want)}，拿到的是 {short(got[u])}")
        if u in quitters:
            check(aborted[u] is True, f"uid {u} 还没结束时 abort(uid) 应当返回 True，你的是 {aborted[u]!r}")
    for u in quitters:  # 取消之后再送来的回复：丢掉
        r.deliver(u, "迟到的回复", True)
    check_equal(r.open_uids, set(), "全部结束或取消之后的 open_uids（有 uid 漏了没注销）")
    check(r.abort(0) is False, "已经结束的 uid 再 abort，应当返回 False")
    # 之前送给"不存在的 uid"（n..n+9）的回复应当已经丢掉：现在真的 open 出这些 uid，
    # 它们的第一段回复必须是新送来的，而不是当时没人要的旧回复
    fresh = [r.open() for _ in range(10)]
    check_equal(fresh, list(range(n, n + 10)), "接着 open() 的 10 个 uid")
    for u in fresh:
        r.deliver(u, f"新#{u}", True)
        got_fresh = await _wait(r.next(u), f"新 uid {u} 的 next()")
        check(got_fresh == (f"新#{u}", True), f"uid {u} 的第一段回复应当是刚送来的 {(f'新#{u}', True)!r}，"
              f"你的是 {got_fresh!r}：给不存在的 uid 的回复应当直接丢掉，不要攒着")


async def backend_dies(ReplyRouter, BackendGone, rng: random.Random) -> None:
    """后端死了：正在等的要醒来；已经到了的回复先交出；之后 open() 也失败。"""
    r = ReplyRouter()
    n = rng.randint(1, 12)
    uids = [r.open() for _ in range(n)]
    queued = {u: [(f"已到#{u}.{i}", False) for i in range(rng.randint(0, 3))] for u in uids}
    results: dict[int, tuple] = {}

    async def consumer(u: int) -> None:
        pieces = []
        try:
            while True:
                pieces.append(await r.next(u))
        except BackendGone as e:
            results[u] = (pieces, str(e))

    tasks = [asyncio.ensure_future(consumer(u)) for u in uids]
    await asyncio.sleep(0)
    for u in uids:
        for piece in queued[u]:
            r.deliver(u, *piece)
    r.fail("调度器 rank 0 退出了")
    for _ in range(3):  # 让事件循环转三圈：被 fail 叫醒的协程这时都该跑完了（不看钟表）
        await asyncio.sleep(0)
    asleep = [u for u, t in zip(uids, tasks) if not t.done()]
    check(not asleep, f"fail() 之后事件循环转了三圈，uid {short(asleep)} 还在等（挂住了）："
          "fail 应当立刻叫醒每个等待者，而不是等它们自己轮询发现")
    await _wait(asyncio.gather(*tasks), f"后端没了以后，{n} 个正在等的协程醒来并抛 BackendGone")
    for u in uids:
        check_equal(results[u][0], queued[u], f"uid {u} 在后端死之前已经到了的回复（应当先交出）")
        check("调度器 rank 0 退出了" in results[u][1], f"BackendGone 应当带着 fail 的原因，你的是 {results[u][1]!r}")
    check_equal(r.open_uids, set(), "抛出 BackendGone 之后的 open_uids")
    try:
        r.open()
    except BackendGone:
        pass
    else:
        raise CheckFailed("fail 之后 open() 应当抛 BackendGone：新请求不能再发给死掉的后端")


def run(mod: object) -> None:
    ReplyRouter = require(mod, "ReplyRouter")
    BackendGone = require(mod, "BackendGone")
    asyncio.run(example(ReplyRouter, BackendGone))
    rng = random.Random(SEED)
    for _ in range(60):
        asyncio.run(traffic(ReplyRouter, rng))
    for _ in range(20):
        asyncio.run(backend_dies(ReplyRouter, BackendGone, rng))


if __name__ == "__main__":
    main(run)
