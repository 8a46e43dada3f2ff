"""第 14 章的 main：两个调度器进程当两个 rank，收同样的流量，逐步比较它们拼出的批。

本进程扮演 tokenizer 进程：bind "tokenizer"（收结果），connect "backend"（发请求）。
rank 0 从 "backend" 收消息，经 PUB/SUB 原样转发给 rank 1，每一步的条数经 gloo 广播。
两个 rank 的模型都是完整的（本章不按 rank 切分），这里只看它们每一步拼出的批是否相同。

同样的流量跑两轮：
  1. decode 批按接纳的顺序（本书的 DecodeManager 用 dict）：两个 rank 每一步的批哈希相同；
  2. 故意做错：decode 批按 set 的迭代顺序（字符串的哈希每个进程随机加盐，两个 rank 的
     PYTHONHASHSEED 不同）——上游 #113 修掉的就是这一类错误。
最后量条数广播的开销，和 decode 一步的时间比一比。

用法：python examples/ch14_scheduler_io.py
"""

from __future__ import annotations

import collections
import hashlib
import multiprocessing as mp
import os
import queue
import shutil
import statistics
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

from minibook.models import tiny_qwen3
from minisgl.core import Batch, SamplingParams
from minisgl.distributed import DistributedInfo
from minisgl.message import (
    AbortBackendMsg,
    BaseBackendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    ExitMsg,
    RejectMsg,
    UserMsg,
)
from minisgl.scheduler import Scheduler, SchedulerConfig
from minisgl.scheduler.decode import DecodeManager
from minisgl.scheduler.io import SchedulerIO
from minisgl.utils.logger import set_log_rank
from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue, ipc_addr, new_ipc_dir

WORLD = 2
SETTINGS = dict(max_running_req=8, page_size=2, num_page_override=256, max_seq_len_override=96)
ORDERS = ["dict", "set"]  # 第 1 轮正确，第 2 轮故意做错
BENCH_ROUNDS = 500


# ---------------------------------------------------------------- 每个 rank 的进程


class OrderedDecodeManager(DecodeManager):
    """可以切换 decode 批顺序的 DecodeManager："dict" 按接纳顺序，"set" 按 set 的迭代顺序。"""

    order = "dict"

    def schedule_next_batch(self) -> Batch | None:
        if self.order == "dict" or not self.running:
            return super().schedule_next_batch()
        # 错误示范：set 的迭代顺序取决于元素的哈希。字符串的哈希每个进程随机加盐，
        # Req 对象（上游的写法）按内存地址哈希——两者都是"进程本地"的
        tags = {f"req-{uid}" for uid in self.running}
        return Batch([self.running[int(tag[4:])] for tag in tags], "decode")


class TracingScheduler(Scheduler):
    """每拼一批记一笔：(时刻, 阶段, ((uid, 这一步算几个 token), ...))。"""

    def __init__(self, config: SchedulerConfig, io: SchedulerIO) -> None:
        super().__init__(config, io=io)
        self.decode_manager = self.prefill_manager.decode_manager = OrderedDecodeManager()
        self.trace: list[tuple[float, str, tuple]] = []

    def _prepare_batch(self, batch: Batch):
        self.trace.append((time.perf_counter(), batch.phase,
                           tuple((req.uid, req.extend_len) for req in batch.reqs)))
        return super()._prepare_batch(batch)


def rank_main(rank: int, ipc_dir: str, results) -> None:
    try:
        torch.set_num_threads(1)
        set_log_rank(rank)
        dist.init_process_group("gloo", init_method=f"file://{ipc_dir}/gloo-init", rank=rank,
                                world_size=WORLD, timeout=timedelta(seconds=60))
        config = SchedulerConfig(model_path=tiny_qwen3(), ipc_dir=ipc_dir, **SETTINGS)
        # 引擎仍是单卡（tp 1）的完整模型；只有收发按 2 个 rank 来
        io = SchedulerIO(config, DistributedInfo(rank, WORLD), dist.group.WORLD)
        broadcast_s: list[float] = []
        agree = io.agree_count

        def timed_agree(count: int) -> int:
            start = time.perf_counter()
            try:
                return agree(count)
            finally:
                broadcast_s.append(time.perf_counter() - start)

        io.agree_count = timed_agree  # type: ignore[method-assign]
        sched = TracingScheduler(config, io)
        for order in ORDERS:
            sched.decode_manager.order = order
            sched.trace, broadcast_s[:] = [], []
            sched.run_forever()  # 收到 ExitMsg 时返回
            results.put((rank, order, sched.trace, list(broadcast_s)))
        start = time.perf_counter()
        for _ in range(BENCH_ROUNDS):
            agree(0)
        results.put((rank, "bench", (time.perf_counter() - start) / BENCH_ROUNDS, None))
        sched.shutdown()
    except BaseException:
        results.put((rank, "error", traceback.format_exc(), None))


# ---------------------------------------------------------------- 本进程：扮演 tokenizer


def play_traffic(send: ZmqPushQueue, recv: ZmqPullQueue, uid0: int) -> dict[int, list[int]]:
    """4 个请求一起到；uid0 的第一个 token 回来后再来 3 个（最后一个太长，会被拒绝）；
    uid0+2 收到 3 个 token 后取消它。返回每个请求收到的 token（被拒绝的记为 None）。"""
    gen = torch.Generator().manual_seed(14)

    def user(uid: int, n_prompt: int, max_tokens: int) -> UserMsg:
        ids = torch.randint(0, 49152, (n_prompt,), generator=gen, dtype=torch.int32)
        return UserMsg(uid, ids, SamplingParams(max_tokens=max_tokens, ignore_eos=True))

    # 头 4 个装进一帧：它们一定在同一步到达，第一批 decode 就是这 4 个
    first = [user(uid0 + i, n, m) for i, (n, m) in enumerate([(12, 16), (7, 12), (20, 40), (5, 20)])]
    send.put(BatchBackendMsg(first))
    tokens: dict[int, list[int] | None] = {}
    done: set[int] = set()
    pending = {uid0, uid0 + 1, uid0 + 3}  # 要等到结束的请求
    sent_more = aborted = False
    while pending:
        msg = recv.get(timeout=30_000)
        for reply in msg.data if isinstance(msg, BatchTokenizerMsg) else [msg]:
            if isinstance(reply, RejectMsg):
                tokens[reply.uid] = None
                pending.discard(reply.uid)
                continue
            assert isinstance(reply, DetokenizeMsg)
            if reply.uid in done:
                raise AssertionError(f"请求 {reply.uid} 结束后又收到了 token")
            tokens.setdefault(reply.uid, []).append(reply.next_token)
            if reply.finished:
                done.add(reply.uid)
                pending.discard(reply.uid)
        if not sent_more and tokens.get(uid0):
            sent_more = True
            send.put(user(uid0 + 4, 9, 14))
            send.put(user(uid0 + 5, 30, 10))
            send.put(user(uid0 + 6, 90, 10))  # 90 + 10 > max_seq_len 96：拒绝
            pending |= {uid0 + 4, uid0 + 5, uid0 + 6}
        if not aborted and len(tokens.get(uid0 + 2) or []) >= 3:
            aborted = True
            send.put(AbortBackendMsg(uid0 + 2))
    send.put(ExitMsg())
    return tokens


# ---------------------------------------------------------------- 比较与报告


def step_hash(phase: str, rows: tuple) -> str:
    return hashlib.sha1(repr((phase, rows)).encode()).hexdigest()[:8]


def compare(traces: dict[int, list]) -> tuple[int, list[bool], int | None]:
    """返回 (步数, 每一步批哈希是否相同, 第一个不同的步)。"""
    a, b = traces[0], traces[1]
    assert len(a) == len(b), f"两个 rank 的步数不同：{len(a)} 对 {len(b)}"
    same = [step_hash(*x[1:]) == step_hash(*y[1:]) for x, y in zip(a, b)]
    first_diff = next((i for i, ok in enumerate(same) if not ok), None)
    return len(a), same, first_diff


def kind_of_step(phase: str, rows: tuple) -> str:
    if phase == "prefill":
        return "prefill"
    return "只有一个请求的 decode" if len(rows) == 1 else "多个请求的 decode"


def show_steps(traces: dict[int, list], steps: range) -> None:
    print(f"    {'步':>2}  {'阶段':<7} {'rank 0 的批（uid 后两位:本步 token 数）':<30} "
          f"{'rank 0 哈希':<10} rank 1 哈希")
    for i in steps:
        _, phase, rows = traces[0][i]
        batch = " ".join(f"{uid % 100}:{n}" for uid, n in rows)
        h0, h1 = step_hash(phase, rows), step_hash(*traces[1][i][1:])
        mark = "" if h0 == h1 else "  ≠"
        print(f"    {i:>3}  {phase:<8} {batch:<40} {h0:<12} {h1}{mark}")


def main() -> None:
    ipc_dir = new_ipc_dir()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    recv = ZmqPullQueue(ipc_addr(ipc_dir, "tokenizer"), create=True, decoder=BaseTokenizerMsg.decoder)
    send = ZmqPushQueue(ipc_addr(ipc_dir, "backend"), create=False, encoder=BaseBackendMsg.encoder)
    procs = []
    try:
        for rank in range(WORLD):
            os.environ["PYTHONHASHSEED"] = str(rank)  # 子进程启动时读：两个 rank 的字符串哈希不同
            procs.append(ctx.Process(target=rank_main, args=(rank, ipc_dir, results), daemon=True))
            procs[-1].start()
        os.environ.pop("PYTHONHASHSEED")

        def collect(kind: str) -> dict[int, tuple]:
            got = {}
            while len(got) < WORLD:
                rank, k, payload, extra = results.get(timeout=60)
                if k == "error":
                    raise RuntimeError(f"rank {rank} 出错：\n{payload}")
                assert k == kind, (k, kind)
                got[rank] = (payload, extra)
            return got

        outputs = {}
        for round_no, order in enumerate(ORDERS):
            outputs[order] = play_traffic(send, recv, uid0=100 * (round_no + 1))
            got = collect(order)
            traces = {rank: got[rank][0] for rank in got}
            n, same_steps, first = compare(traces)
            same = sum(same_steps)
            # 第 1 轮必须逐步相同；第 2 轮第一批 decode 就是同样 4 个请求，两个种子下顺序不同
            assert (same == n) == (order == "dict"), (order, same, n)
            title = "decode 批按接纳顺序（dict）" if order == "dict" else \
                "故意做错：decode 批按 set 的迭代顺序（两个 rank 的 PYTHONHASHSEED 不同）"
            print(f"第 {round_no + 1} 轮：{title}")
            print(f"  两个 rank 各拼了 {n} 批；批哈希逐步相同：{same}/{n}")
            if first is not None:
                kinds = collections.Counter(kind_of_step(*traces[0][i][1:]) for i in range(n) if same_steps[i])
                print("  相同的几步：" + "、".join(f"{k} {v} 步" for k, v in sorted(kinds.items())))
            shown = range(first, min(first + 3, n)) if first is not None else range(0, 6)
            show_steps(traces, shown)
            if first is not None:
                rows0, rows1 = traces[0][first][2], traces[1][first][2]
                mixed = sum(x != y for x, y in zip(rows0, rows1))
                print(f"  第 {first} 步起两个 rank 的批不一样：若模型按 rank 切分，"
                      f"这一步的 all_reduce 会把 {mixed}/{len(rows0)} 行加到别的请求上")
            if order == "dict":
                decode_times = [t1[0] - t0[0] for t0, t1 in zip(traces[0], traces[0][1:])
                                if t0[1] == t1[1] == "decode"]
                step_ms = statistics.median(decode_times) * 1e3
                bcast_ms = statistics.median(got[0][1]) * 1e3
            print()
        bench = collect("bench")
        # 两轮里完成的请求：同样的提示、同样的 token，批内顺序不影响不切分的模型
        a = {uid % 100: t for uid, t in outputs["dict"].items() if t is not None}
        b = {uid % 100: t for uid, t in outputs["set"].items() if t is not None}
        finished = sorted(k for k in a if k != 2)
        same_tokens = all(a[k] == b[k] for k in finished)
        print(f"两轮里完成的 {len(finished)} 个请求 token 逐个相同：{same_tokens}"
              "（模型没切分，批内顺序不改变每个请求的结果：这个错在单卡上看不出来）")
        rejected = [uid for uid, t in outputs["dict"].items() if t is None]
        print(f"被拒绝的请求：{rejected}；取消的请求 102 收到 {len(outputs['dict'][102])} 个 token"
              "（max_tokens 40）")
        print()
        bench_us = max(bench[0][0], bench[1][0]) * 1e6
        print("条数广播的开销（与机器有关）：")
        print(f"  连续广播 {BENCH_ROUNDS} 次，平均每次 {bench_us:.0f} µs；decode 一步（两次拼批之间）"
              f"中位数 {step_ms:.1f} ms：每步一次广播约占 {bench_us / 1e3 / step_ms:.1%}")
        print(f"  运行中 rank 0 每步停在广播里的时间中位数 {bcast_ms:.2f} ms：这里也是两个 rank "
              "对齐步调的地方，先到的等后到的")
        assert same_tokens
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        send.stop()
        recv.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
