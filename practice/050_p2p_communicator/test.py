"""练习 050 的评测：1–6 个 rank，每个 rank 一个单独的进程（more_processes），各由评测进程的一个线程驱动。

每个 rank 的进程里：enable_p2p(rank, world, send, recv) 把插件挂上，然后像层那样调用
DistributedCommunicator().all_reduce(x) / .all_gather(x) / .broadcast(x, src)。send / recv 是评测进程里的
信箱（每对 rank 一条先进先出的队列），你的代码调用它们就是跨进程的回调：测试数每个 rank 发了、收了多少字节，
检查消息的去向、缓冲区的形状，以及每次调用结束时没有没人收的消息。别的 rank 的张量在别的进程里，
除了 recv 没有办法拿到。

检查：和、拼接的顺序（批 > 1：行交错过不了）、原地 / 不共用内存的约定、各 rank 的和逐位相同。
用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import queue
import random
import sys
import threading
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    CheckFailed,
    check,
    check_close,
    check_tensor,
    main,
    mistake_hint,
    more_processes,
    require,
    seed,
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
WAIT_S = 5.0  # recv 最多等这么久
MAX_WORLD = 6
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64]


def dname(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


# ---------------------------------------------------------------------------
# 网络：每对 (src, dst) 一条先进先出的队列；send 立刻返回，recv 等消息
# ---------------------------------------------------------------------------


class Net:
    def __init__(self, world: int) -> None:
        self.world = world
        self.boxes = {(s, d): queue.Queue() for s in range(world) for d in range(world) if s != d}
        self.sent = [0] * world  # 字节
        self.received = [0] * world
        self.abort = threading.Event()  # 有一个 rank 出错了：别的 rank 别再傻等

    def reset_counts(self) -> None:
        self.sent = [0] * self.world
        self.received = [0] * self.world

    def leftovers(self) -> list[str]:
        return [f"rank {s} 发给 rank {d} 的 {box.qsize()} 条" for (s, d), box in self.boxes.items() if box.qsize()]


class Endpoint:
    """一个 rank 的 send / recv：它只能以自己的身份发、只能收发给自己的。"""

    def __init__(self, net: Net, rank: int, op: list[str]) -> None:
        self.net, self.rank, self.op = net, rank, op

    def _peer(self, other, name: str, what: str) -> int:
        world = self.net.world
        if not isinstance(other, int) or isinstance(other, bool):
            raise CheckFailed(f"rank {self.rank} 在 {self.op[0]} 里调用 {name}，{what} 应该是 int，你给的是 "
                              f"{type(other).__name__}：{short(other)}")
        if not 0 <= other < world or other == self.rank:
            raise CheckFailed(f"rank {self.rank} 在 {self.op[0]} 里调用 {name}，{what} = {other} 不对：共 {world} 个 rank，"
                              f"它应该在 [0, {world}) 里、而且不是自己（{self.rank}）")
        return other

    def send(self, tensor, dst) -> None:
        if not isinstance(tensor, torch.Tensor):
            raise CheckFailed(f"rank {self.rank} 的 send 的第一个参数应该是张量，你给的是 {type(tensor).__name__}")
        dst = self._peer(dst, f"send(张量, dst={short(dst)})", "dst")
        self.net.boxes[(self.rank, dst)].put(tensor.detach().clone())
        self.net.sent[self.rank] += nbytes(tensor)

    def recv(self, tensor, src) -> None:
        if not isinstance(tensor, torch.Tensor):
            raise CheckFailed(f"rank {self.rank} 的 recv 的第一个参数应该是张量（收到的数据写进它），"
                              f"你给的是 {type(tensor).__name__}")
        src = self._peer(src, f"recv(张量, src={short(src)})", "src")
        box = self.net.boxes[(src, self.rank)]
        waited = 0.0
        while True:
            try:
                msg = box.get(timeout=0.05)
                break
            except queue.Empty:
                waited += 0.05
                if self.net.abort.is_set():
                    raise CheckFailed(f"rank {self.rank} 在等 rank {src} 的消息时，另一个 rank 已经出错了") from None
                if waited >= WAIT_S:
                    raise CheckFailed(
                        f"rank {self.rank} 在 {self.op[0]} 里 recv(…, src={src}) 等了 {WAIT_S:g} 秒也没有消息："
                        f"rank {src} 没有发给它（或者发的条数比这边收的少）。send 立刻返回，先把该发的都发出去再收，"
                        "就不会互相等死") from None
        if tuple(tensor.shape) != tuple(msg.shape) or tensor.dtype != msg.dtype:
            raise CheckFailed(
                f"rank {self.rank} 在 {self.op[0]} 里 recv 的缓冲区是 {tuple(tensor.shape)}、{dname(tensor.dtype)}，"
                f"rank {src} 发来的这条是 {tuple(msg.shape)}、{dname(msg.dtype)}：缓冲区的形状和 dtype 要和发来的一样")
        tensor.copy_(msg)
        self.net.received[self.rank] += nbytes(msg)


# ---------------------------------------------------------------------------
# 驱动：每个 rank 一个线程，各自调用自己进程里的 DistributedCommunicator
# ---------------------------------------------------------------------------


class Group:
    """一组 rank（world 个进程），挂好了同一个 Net 上的插件。"""

    def __init__(self, procs: list, world: int) -> None:
        self.world = world
        self.net = Net(world)
        self.op = [""]
        self.kept: list = []  # 以前 all_gather 的结果：之后的调用不能改写它们
        self.comms = []
        for r in range(world):
            ep = Endpoint(self.net, r, self.op)
            procs[r].enable_p2p(r, world, ep.send, ep.recv)
            self.comms.append(procs[r].DistributedCommunicator())

    def call(self, op: str, xs: list[torch.Tensor], *extra) -> list:
        self.op[0] = f"{op}"
        self.net.reset_counts()
        self.net.abort.clear()
        results: list = [None] * self.world
        errors: list = []

        def work(r: int) -> None:
            try:
                results[r] = getattr(self.comms[r], op)(xs[r], *extra)
            except CheckFailed as e:
                errors.append(e)
                self.net.abort.set()
            except NotImplementedError as e:
                errors.append(e)
                self.net.abort.set()
            except Exception as e:  # noqa: BLE001 - 学习者的代码出错
                where = getattr(e, "remote_where", "")
                errors.append(CheckFailed(f"rank {r} 的 {op} 出错：{getattr(e, 'remote_type', type(e).__name__)}: {e}"
                                          + (f"（{where}）" if where else "")))
                self.net.abort.set()
            except BaseException as e:  # noqa: BLE001 - 这个 rank 的进程没了、卡住了
                errors.append(e)
                self.net.abort.set()

        threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in range(self.world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        check(not any(t.is_alive() for t in threads), f"{self.world} 个 rank 的 {op} 有的 60 秒还没返回")
        real = [e for e in errors if not (isinstance(e, CheckFailed) and "另一个 rank 已经出错" in str(e))]
        if real or errors:
            raise (real or errors)[0]
        left = self.net.leftovers()
        check(not left, f"{self.world} 个 rank 的 {op} 都返回了，信箱里还有没人收的消息：{'；'.join(left)}。\n"
                        "  每次调用发出去的消息要在这次调用里收完：留下的会被下一次集合通信当成它的数据收走")
        return results


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def random_kind(rng: random.Random) -> tuple[list[int], torch.dtype]:
    """一组 rank 上各次调用的形状和 dtype（像一次前向里的各层：隐状态的形状一样）。"""
    return [rng.randint(2, 4)] + [rng.randint(1, 5) for _ in range(rng.randint(0, 2))], rng.choice(DTYPES)


def random_inputs(gen: torch.Generator, world: int, shape: list[int], dtype: torch.dtype) -> list[torch.Tensor]:
    if dtype == torch.int64:
        return [torch.randint(-1000, 1000, shape, generator=gen) for _ in range(world)]
    return [(torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype) for _ in range(world)]


def describe(xs: list[torch.Tensor]) -> str:
    return f"{len(xs)} 个 rank，每个 x 形状 {tuple(xs[0].shape)}、{dname(xs[0].dtype)}"


def tolerance(dtype: torch.dtype) -> float:
    return {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-2, torch.bfloat16: 1e-1}.get(dtype, 0.0)


def check_traffic(group: Group, op: str, xs: list[torch.Tensor], least: int, context: str) -> None:
    world, size = group.world, nbytes(xs[0])
    if world == 1:
        return
    for r in range(world):
        got, sent = group.net.received[r], group.net.sent[r]
        check(got >= least,
              f"{op}：rank {r} 只经 recv 收到了 {got} 字节，至少要 {least} 字节（别的 rank 的数据只能经 recv 收到，"
              f"{'它们的和有 x 那么大' if op == 'all_reduce' else '别人的 x 一共有 (world − 1) 个 x 那么大'}）。\n"
              f"  输入：{context}")
        check(sent <= (world - 1) * size,
              f"{op}：rank {r} 发了 {sent} 字节，超过了 (world − 1) × x = {(world - 1) * size} 字节："
              f"把 x 发给其余每个 rank 一次就够了。\n  输入：{context}")


def check_all_reduce(group: Group, xs: list[torch.Tensor]) -> None:
    world = group.world
    originals = [x.clone() for x in xs]
    context = describe(xs)
    results = group.call("all_reduce", xs)
    exact = sum(o.double() for o in originals)
    tol = tolerance(xs[0].dtype)
    for r, (got, x) in enumerate(zip(results, xs)):
        what = f"rank {r} 的 all_reduce(x) 的返回值"
        check_tensor(got, what, shape=tuple(originals[r].shape), dtype=originals[r].dtype)
        if xs[0].dtype == torch.int64:
            check(torch.equal(got, exact.long()), f"{what} 不是各 rank 的 x 之和。\n  输入：{context}"
                  + mistake_hint(["没有和别的 rank 通信，原样返回了 x"] if torch.equal(got, originals[r]) else []))
        else:
            hits = ["没有和别的 rank 通信，原样返回了 x"] if torch.equal(got, originals[r]) and world > 1 else []
            if hits:
                check(False, f"{what} 不是各 rank 的 x 之和。\n  输入：{context}" + mistake_hint(hits))
            check_close(got.double(), exact, what + "（各 rank 的 x 之和）", atol=tol, rtol=tol)
        check(got is x and torch.equal(x, got),
              f"rank {r} 的 all_reduce 要原地做：把和写进传进来的 x、返回 x 本身（和 dist.all_reduce 一样，"
              "不另分配一块和 x 一样大的内存）。你的"
              + ("返回了别的张量" if got is not x else "返回值和 x 的内容不一样")
              + ("，x 没有被改成和" if torch.equal(x, originals[r]) and world > 1 else "") + f"。\n  输入：{context}")
    for r in range(1, world):
        if not torch.equal(results[r], results[0]):
            diff = float((results[r].double() - results[0].double()).abs().max())
            check(False, f"rank {r} 和 rank 0 的 all_reduce 结果不是逐位相同（最大差 {diff:.3g}）。\n"
                         "  浮点加法不满足结合律：各 rank 按不同的顺序加（比如都先加自己的），和就差在最后几位。"
                         "张量并行里各 rank 的隐状态必须一模一样，所以每个 rank 都要按同一个顺序加"
                         f"（比如 rank 0, 1, 2 …），或者由一个 rank 加好再发给大家。\n  输入：{context}")
    check_traffic(group, "all_reduce", originals, nbytes(originals[0]), context)


def check_all_gather(group: Group, xs: list[torch.Tensor]) -> None:
    world = group.world
    originals = [x.clone() for x in xs]
    context = describe(xs)
    results = group.call("all_gather", xs)
    want = torch.cat(originals)
    n = originals[0].shape[0]
    for r, (got, x) in enumerate(zip(results, xs)):
        what = f"rank {r} 的 all_gather(x) 的返回值"
        try:
            check_tensor(got, what, shape=tuple(want.shape), dtype=want.dtype)
        except CheckFailed as e:
            hint = ""
            if isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(x.shape) and world > 1:
                hint = mistake_hint(["只有自己的 x：没有收别的 rank 的 x 拼上去"])
            raise CheckFailed(f"{e}\n  输入：{context}{hint}") from None
        if not torch.equal(got, want):
            hits = []
            if world > 1 and torch.equal(got, torch.stack(originals, dim=1).reshape(want.shape)):
                hits.append("行交错了：结果是 [rank 0 的第 0 行, rank 1 的第 0 行, …, rank 0 的第 1 行, …]。"
                            f"要的是 rank 0 的 {n} 行整块在前，然后 rank 1 的 {n} 行……（按第 0 维拼接，"
                            f"结果.view({world}, {n}, …)[i] 就是 rank i 的 x）。上游 mini-sglang 的 LM head 出过同一类 bug，批大小 > 1 才露馅（#98）")
            if world > 1 and torch.equal(got, torch.cat(originals[r:] + originals[:r])):
                hits.append(f"从自己（rank {r}）开始拼了：不管是哪个 rank，结果的第一块都是 rank 0 的 x")
            if world > 2 and torch.equal(got, torch.cat(originals[::-1])):
                hits.append("顺序反了：rank 0 的 x 在最前")
            if world > 1 and torch.equal(got, torch.cat([originals[r]] * world)):
                hits.append("没有收别的 rank 的 x，把自己的复制了几份")
            bad = int((got != want).reshape(want.shape[0], -1).any(dim=1).nonzero()[0])
            check(False, f"{what} 不对：第 {bad} 行应该是 rank {bad // n} 的 x 的第 {bad % n} 行"
                         f"（各 rank 的 x 按 rank 顺序沿第 0 维拼起来，形状 {tuple(want.shape)}）。\n"
                         f"  输入：{context}" + mistake_hint(hits))
        check(torch.equal(x, originals[r]), f"rank {r} 的 all_gather 改动了传进来的 x：它只读 x。\n  输入：{context}")
        shared = got is x or got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        check(not shared,
              f"rank {r} 的 all_gather 返回的张量和传进来的 x 共用内存（{'就是 x 本身' if got is x else 'x 的视图'}）："
              "all_gather 要返回一块新的内存，world_size = 1 时也要拷贝一份。调用者之后改写自己的 x（比如下一步的"
              f"缓冲区）时，拼好的结果不能跟着变。\n  输入：{context}")
    check_traffic(group, "all_gather", originals, (world - 1) * nbytes(originals[0]), context)
    group.kept += [(r, got, got.clone(), context) for r, got in enumerate(results)]


def check_broadcast(group: Group, xs: list[torch.Tensor], src: int) -> None:
    """broadcast 是写好的例子：确认它没被改坏，也让各 rank 在它前后的消息不串。"""
    originals = [x.clone() for x in xs]
    results = group.call("broadcast", xs, src)
    for r, (got, x) in enumerate(zip(results, xs)):
        check(got is x and torch.equal(x, originals[src]),
              f"rank {r} 的 broadcast(x, src={src}) 应该原地把 x 换成 rank {src} 的 x 并返回它"
              f"（它是题目里写好的例子，别改坏了）。\n  输入：{describe(xs)}")


def spawn(mod, count: int) -> list:
    """再起 count 个学习者进程；一起起，各自 import torch 的时间叠在一起。"""
    out: list = [None] * count
    errors: list = []

    def one(i: int) -> None:
        try:
            out[i] = more_processes(mod, 1)[0]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def session(procs: list, world: int, rng: random.Random, gen: torch.Generator, ops: list[str], kind=None) -> None:
    """一组 rank 上连着做几次集合通信（同一个插件），像一次前向里的几层。"""
    group = Group(procs, world)
    shape, dtype = kind or random_kind(rng)
    for op in ops:
        xs = random_inputs(gen, world, shape, dtype)
        if op == "all_reduce":
            check_all_reduce(group, xs)
        elif op == "all_gather":
            check_all_gather(group, xs)
        else:
            check_broadcast(group, xs, rng.randrange(world))
        for r, got, before, context in group.kept:
            check(torch.equal(got, before),
                  f"rank {r} 以前一次 all_gather 返回的结果，在后来的 {op} 之后变了：all_gather 每次都要返回一块新的内存，"
                  f"不能把上一次交出去的张量拿来当这一次的缓冲区（调用者还拿着它）。\n  那一次的输入：{context}")


def run(mod: object) -> None:
    require(mod, "P2PDistributedImpl")
    require(mod, "DistributedCommunicator")
    require(mod, "enable_p2p")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    # 一个 rank：不用通信，但约定一样（all_reduce 原地返回 x，all_gather 返回拷贝）
    session([mod], 1, rng, gen, ["all_reduce", "all_gather", "all_gather"])

    # 一个 rank 一个进程；进程按需要再起（每个都要 import 一遍 torch），从 2 个、3 个 rank 开始：
    # 多数写错的地方在这里就露馅了，不必等 6 个进程都起来
    procs = [mod]
    worlds = [2, 3] + rng.sample([4, 5, 6], 3) + [rng.randint(2, MAX_WORLD) for _ in range(6)]
    for world in worlds:
        if len(procs) < world:
            procs += spawn(mod, world - len(procs))
        ops = ["all_reduce", "all_gather", "all_gather"] + [rng.choice(["all_reduce", "all_gather", "broadcast"])
                                                            for _ in range(rng.randint(0, 2))]
        rng.shuffle(ops)
        session(procs, world, rng, gen, ops)
    # float32、3 个以上的 rank、几百个数：各 rank 相加的顺序不同，总有几个数的和差在最后一位
    session(procs, rng.randint(3, MAX_WORLD), rng, gen, ["all_reduce", "all_reduce"], ([4, 64], torch.float32))


if __name__ == "__main__":
    main(run)
