"""练习 047 的评测：几十个并发的等待者，回复随机交错地送到；有的中途取消；最后后端"死掉"。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_equal, check_type, main, require, short, seed, stage

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
WORDS = ["巴黎", " is", " the", "。", "😀", "", " capital", "\n", "of", " France"]
HANG = 2.0  # 秒：等这么久还没醒，就判"挂住了"

# 你的协程要在一个事件循环里跑，而 asyncio 的事件循环、你的 asyncio.Queue 只能在你的进程里：
# 所以场景由下面这段驱动在你的进程里执行。它只按评测事先排好的剧本（谁先 open、哪段回复什么时候送到、
# 谁中途取消）操作你的对象，把看到的（每个等待者拿到了什么、谁挂住了）按值交回来；对不对在评测进程里
# 判断。驱动里没有参考实现，也没有结论。
STAGE = """
import asyncio

HANG = %r


class Hung(Exception):
    pass


async def _wait(awaitable):
    try:
        return await asyncio.wait_for(awaitable, HANG)
    except asyncio.TimeoutError:
        raise Hung() from None


async def _gone(mod, awaitable):  # ("gone", 原因) / ("returned", 值)；挂住了抛 Hung
    try:
        return "returned", await _wait(awaitable)
    except mod.BackendGone as e:
        return "gone", str(e)


def play(scene, mod, *args):
    obs = {}
    try:
        asyncio.run(scene(obs, mod, *args))
    except Hung:
        obs["hung"] = True
    return obs


async def example(obs, mod):
    r = mod.ReplyRouter()
    obs["ab"] = (r.open(), r.open())
    a, b = obs["ab"]
    r.deliver(b, "你好", False)
    r.deliver(a, "Hi", True)
    obs["next(a)"] = await _wait(r.next(a))
    obs["next(b)"] = await _wait(r.next(b))
    obs["open_after_a"] = r.open_uids
    r.fail("调度器退出了")
    obs["after_fail"] = await _gone(mod, r.next(b))
    obs["open_final"] = r.open_uids


async def traffic(obs, mod, n, scripts, quitters, plan):
    r = mod.ReplyRouter()
    obs["uids"] = uids = [r.open() for _ in range(n)]
    obs["open_all"] = r.open_uids
    got = obs["got"] = {u: [] for u in uids}
    aborted = obs["aborted"] = {}

    async def consumer(u):
        while True:
            if u in quitters and len(got[u]) == quitters[u]:
                aborted[u] = r.abort(u)
                return
            piece = await r.next(u)
            got[u].append(piece)
            if piece[1]:
                return

    tasks = [asyncio.ensure_future(consumer(u)) for u in uids]
    for step in plan:  # 评测排好的送达顺序："d" 送一段，"y" 让事件循环转一下
        if step[0] == "d":
            r.deliver(*step[1:])
        else:
            await asyncio.sleep(0)
    obs["gather"] = "hung"
    await _wait(asyncio.gather(*tasks))
    obs["gather"] = "done"
    for u in quitters:  # 取消之后再送来的回复：丢掉
        r.deliver(u, "迟到的回复", True)
    obs["open_after"] = r.open_uids
    obs["abort(0)"] = r.abort(0)
    obs["fresh"] = fresh = [r.open() for _ in range(10)]
    obs["fresh_next"] = {}
    for u in fresh:
        r.deliver(u, "新#%%d" %% u, True)
        obs["fresh_next"][u] = "hung"
        obs["fresh_next"][u] = await _wait(r.next(u))


async def backend_dies(obs, mod, n, queued):
    r = mod.ReplyRouter()
    uids = [r.open() for _ in range(n)]
    results = obs["results"] = {}

    async def consumer(u):
        pieces = []
        try:
            while True:
                pieces.append(await r.next(u))
        except mod.BackendGone as e:
            results[u] = (pieces, str(e))

    tasks = [asyncio.ensure_future(consumer(u)) for u in uids]
    await asyncio.sleep(0)
    for u in uids:
        for piece in queued[u]:
            r.deliver(u, *piece)
    r.fail("调度器 rank 0 退出了")
    for _ in range(3):  # 让事件循环转三圈：被 fail 叫醒的协程这时都该跑完了（不看钟表）
        await asyncio.sleep(0)
    obs["asleep"] = [u for u, t in zip(uids, tasks) if not t.done()]
    obs["gather"] = "hung"
    await _wait(asyncio.gather(*tasks))
    obs["gather"] = "done"
    obs["open_after"] = r.open_uids
    try:
        r.open()
    except mod.BackendGone:
        obs["open()"] = "gone"
    else:
        obs["open()"] = "returned"
""" % HANG


def hung(what: str) -> CheckFailed:
    return CheckFailed(f"{what}：{HANG} 秒还没有返回，挂住了")


def seen(obs: dict, key: str, what: str):
    """驱动记下的一项；驱动停在了挂住的地方、没走到这一项，就是挂住了。"""
    if key not in obs:
        raise hung(what)
    return obs[key]


def example(kit, mod) -> None:
    obs = kit.play(kit.example, mod)
    check_equal(seen(obs, "ab", "open()"), (0, 1), "前两次 open() 返回的 uid")
    check_equal(seen(obs, "next(a)", "next(a)"), ("Hi", True), "题目例子里 next(a)")
    check_equal(seen(obs, "next(b)", "next(b)"), ("你好", False), "题目例子里 next(b)")
    check_equal(obs["open_after_a"], {1}, "a 结束之后的 open_uids")
    outcome = seen(obs, "after_fail", "fail 之后的 next(b)")
    check(outcome[0] == "gone", "fail 之后 next(b) 应当抛 BackendGone")
    check_equal(obs["open_final"], set(), "题目例子最后的 open_uids")


def traffic(kit, mod, rng: random.Random) -> None:
    """很多个请求并发：每个等待者应当正好拿到自己的回复，顺序不乱。"""
    n = rng.randint(1, 40)
    uids = list(range(n))
    scripts = {u: [(rng.choice(WORDS) + f"#{u}.{i}", False) for i in range(rng.randint(0, 6))] for u in uids}
    for u in uids:
        scripts[u].append((f"完#{u}", True))
    quitters = {u: rng.randint(0, len(scripts[u]) - 1) for u in uids if rng.random() < 0.25}
    plan: list[tuple] = []  # 送达的顺序：随机交错，夹着给不存在的 uid 的回复，时不时让事件循环转一下
    pending = {u: list(s) for u, s in scripts.items()}
    while any(pending.values()):
        u = rng.choice([u for u, s in pending.items() if s])
        plan.append(("d", u, *pending[u].pop(0)))
        if rng.random() < 0.2:
            plan.append(("d", n + rng.randint(0, 9), "不存在的 uid", rng.random() < 0.5))
        if rng.random() < 0.5:
            plan.append(("y",))
    obs = kit.play(kit.traffic, mod, n, scripts, quitters, plan)
    check_equal(obs["uids"], uids, f"连续 {n} 次 open() 返回的 uid")
    check_type(obs["open_all"], set, "open_uids")
    check_equal(obs["open_all"], set(uids), "全部登记之后的 open_uids")
    if obs["gather"] != "done":
        raise hung(f"{n} 个等待者收完各自的回复")
    got, aborted = obs["got"], obs["aborted"]
    for u in uids:
        want = scripts[u][: quitters[u]] if u in quitters else scripts[u]
        check(got[u] == want, f"uid {u} 拿到的回复不对：应该是 {short(want)}，拿到的是 {short(got[u])}")
        if u in quitters:
            check(aborted[u] is True, f"uid {u} 还没结束时 abort(uid) 应当返回 True，你的是 {aborted[u]!r}")
    check_equal(obs["open_after"], set(), "全部结束或取消之后的 open_uids（有 uid 漏了没注销）")
    check(obs["abort(0)"] is False, "已经结束的 uid 再 abort，应当返回 False")
    # 之前送给"不存在的 uid"（n..n+9）的回复应当已经丢掉：现在真的 open 出这些 uid，
    # 它们的第一段回复必须是新送来的，而不是当时没人要的旧回复
    check_equal(obs["fresh"], list(range(n, n + 10)), "接着 open() 的 10 个 uid")
    for u in obs["fresh"]:
        got_fresh = obs["fresh_next"].get(u, "hung")
        if got_fresh == "hung":
            raise hung(f"新 uid {u} 的 next()")
        check(got_fresh == (f"新#{u}", True), f"uid {u} 的第一段回复应当是刚送来的 {(f'新#{u}', True)!r}，"
              f"你的是 {got_fresh!r}：给不存在的 uid 的回复应当直接丢掉，不要攒着")


def backend_dies(kit, mod, rng: random.Random) -> None:
    """后端死了：正在等的要醒来；已经到了的回复先交出；之后 open() 也失败。"""
    n = rng.randint(1, 12)
    queued = {u: [(f"已到#{u}.{i}", False) for i in range(rng.randint(0, 3))] for u in range(n)}
    obs = kit.play(kit.backend_dies, mod, n, queued)
    asleep = obs["asleep"]
    check(not asleep, f"fail() 之后事件循环转了三圈，uid {short(asleep)} 还在等（挂住了）："
          "fail 应当立刻叫醒每个等待者，而不是等它们自己轮询发现")
    if obs["gather"] != "done":
        raise hung(f"后端没了以后，{n} 个正在等的协程醒来并抛 BackendGone")
    results = obs["results"]
    for u in range(n):
        check_equal(results[u][0], queued[u], f"uid {u} 在后端死之前已经到了的回复（应当先交出）")
        check("调度器 rank 0 退出了" in results[u][1], f"BackendGone 应当带着 fail 的原因，你的是 {results[u][1]!r}")
    check_equal(obs["open_after"], set(), "抛出 BackendGone 之后的 open_uids")
    check(obs["open()"] == "gone", "fail 之后 open() 应当抛 BackendGone：新请求不能再发给死掉的后端")


def run(mod: object) -> None:
    require(mod, "ReplyRouter")
    require(mod, "BackendGone")
    kit = stage(mod, STAGE)
    example(kit, mod)
    rng = random.Random(SEED)
    for _ in range(60):
        traffic(kit, mod, rng)
    for _ in range(20):
        backend_dies(kit, mod, rng)


if __name__ == "__main__":
    main(run)
