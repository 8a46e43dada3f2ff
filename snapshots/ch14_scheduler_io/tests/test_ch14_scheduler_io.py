"""第 14 章：调度器的收发与多 rank 同步。

全部用真进程（spawn）和每次新建的 ipc 目录；测试进程扮演 tokenizer 进程，用真的 ZMQ 套接字
发 UserMsg / AbortBackendMsg / ExitMsg，收 DetokenizeMsg / RejectMsg。

- 单 rank、不重叠：贪心输出与 HF 逐 token 相同；有问题的请求收到 RejectMsg，别的照常；
  取消的请求不再有结果，空闲时 KV 页核对通过；ExitMsg 让进程干净退出。
- 两个 rank（两份完整的 tiny Qwen3，重叠调度）：两个 rank 每一步收到同样的消息、拼出同样的批，
  只有 rank 0 回复；故意让 decode 顺序取决于进程本地的东西（字符串 set，两个 rank 的
  PYTHONHASHSEED 不同），批就不一样了。
- 迟到的订阅者：调度器启动之前就排好的消息，rank 0 一握手完就转发，rank 1 一条不少。
- 高水位：一步转发 1000 多条（超过 ZMQ 默认的高水位），rank 1 照样一条不少。
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import shutil
import threading
import time
import traceback
from datetime import timedelta

import pytest
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
from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue, ipc_addr, new_ipc_dir

SETTINGS = dict(max_running_req=8, page_size=2, num_page_override=160, max_seq_len_override=80)
TIMEOUT_S = 60


# ---------------------------------------------------------------- 调度器进程里运行的部分


class OrderedDecodeManager(DecodeManager):
    """order = "set" 时故意做错：decode 批按字符串 set 的迭代顺序（每个进程的哈希种子不同）。"""

    order = "dict"

    def schedule_next_batch(self) -> Batch | None:
        if self.order == "dict" or not self.running:
            return super().schedule_next_batch()
        tags = {f"req-{uid}" for uid in self.running}
        return Batch([self.running[int(tag[4:])] for tag in tags], "decode")


def describe(msg: BaseBackendMsg) -> tuple:
    """一条消息的可比较摘要（包括提示的 token）。"""
    if isinstance(msg, BatchBackendMsg):
        return ("batch", tuple(describe(m) for m in msg.data))
    if isinstance(msg, UserMsg):
        return ("user", msg.uid, tuple(msg.input_ids.tolist()), msg.sampling_params.max_tokens)
    return (type(msg).__name__, getattr(msg, "uid", None))


class RecordingScheduler(Scheduler):
    """记下每次 receive_msg 收到的消息，和每一批的 (阶段, ((uid, 本步 token 数), ...))。"""

    def __init__(self, config: SchedulerConfig, io: SchedulerIO) -> None:
        super().__init__(config, io=io)
        self.decode_manager = self.prefill_manager.decode_manager = OrderedDecodeManager()
        self.received: list[tuple] = []
        self.batches: list[tuple] = []
        receive = io.receive_msg

        def recording_receive(*args, **kwargs):
            msgs = receive(*args, **kwargs)
            self.received.append(tuple(describe(m) for m in msgs))
            return msgs

        io.receive_msg = recording_receive  # type: ignore[method-assign]

    def _prepare_batch(self, batch: Batch):
        self.batches.append((batch.phase, tuple((r.uid, r.extend_len) for r in batch.reqs)))
        return super()._prepare_batch(batch)


def serve(rank: int, world: int, ipc_dir: str, overlap: bool, orders: list[str], results) -> None:
    """一个调度器 rank：每个 order 跑一次 run_forever（直到 ExitMsg），报告记录和页的账目。"""
    try:
        torch.set_num_threads(1)
        os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "0" if overlap else "1"
        group = None
        if world > 1:
            dist.init_process_group("gloo", init_method=f"file://{ipc_dir}/gloo-init", rank=rank,
                                    world_size=world, timeout=timedelta(seconds=TIMEOUT_S))
            group = dist.group.WORLD
        config = SchedulerConfig(model_path=tiny_qwen3(), ipc_dir=ipc_dir, **SETTINGS)
        io = SchedulerIO(config, DistributedInfo(rank, world), group)
        sched = RecordingScheduler(config, io)
        for order in orders:
            sched.decode_manager.order = order
            sched.received, sched.batches = [], []
            sched.run_forever()
            try:
                sched.run_when_idle()
                integrity = None
            except RuntimeError as e:
                integrity = str(e)
            cm = sched.cache_manager
            results.put((rank, order, dict(received=sched.received, batches=sched.batches,
                                           integrity=integrity, available=cm.available_size,
                                           num_pages=cm.num_pages, overlap=sched.overlap)))
        sched.shutdown()
        results.put((rank, "exit", None))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


BURST = 3000  # 一步转发的帧要超过 ZMQ 默认的高水位 1000


def receive_burst(rank: int, ipc_dir: str, go, results) -> None:
    """只有 SchedulerIO 的一个 rank：等 go 之后收满 BURST 条，报告每一步收到的 uid。"""
    try:
        dist.init_process_group("gloo", init_method=f"file://{ipc_dir}/gloo-init", rank=rank, world_size=2,
                                timeout=timedelta(seconds=TIMEOUT_S))
        config = SchedulerConfig(model_path="不加载模型", ipc_dir=ipc_dir)
        io = SchedulerIO(config, DistributedInfo(rank, 2), dist.group.WORLD)
        if rank == 0:
            go.wait()  # 整批消息先堆在 backend 里：第一步就取走一千多条
        steps, total = [], 0
        while total < BURST:
            uids = [m.uid for m in io.receive_msg(blocking=True)]
            steps.append(uids)
            total += len(uids)
        io.stop()
        results.put((rank, "burst", steps))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


# ---------------------------------------------------------------- 测试进程：扮演 tokenizer


class Player:
    """tokenizer 进程的替身：bind "tokenizer"，connect "backend"。"""

    def __init__(self, ipc_dir: str) -> None:
        self.recv = ZmqPullQueue(ipc_addr(ipc_dir, "tokenizer"), create=True,
                                 decoder=BaseTokenizerMsg.decoder)
        self.send = ZmqPushQueue(ipc_addr(ipc_dir, "backend"), create=False,
                                 encoder=BaseBackendMsg.encoder)
        self.tokens: dict[int, list[int]] = {}
        self.finished: dict[int, int] = {}  # uid → 收到 finished=True 的次数
        self.rejects: dict[int, str] = {}

    def pump(self, timeout_ms: int = TIMEOUT_S * 1000) -> None:
        msg = self.recv.get(timeout=timeout_ms)
        for reply in msg.data if isinstance(msg, BatchTokenizerMsg) else [msg]:
            if isinstance(reply, RejectMsg):
                self.rejects[reply.uid] = reply.reason
            else:
                assert isinstance(reply, DetokenizeMsg)
                assert reply.uid not in self.finished, f"请求 {reply.uid} 结束后又收到 token"
                self.tokens.setdefault(reply.uid, []).append(reply.next_token)
                if reply.finished:
                    self.finished[reply.uid] = self.finished.get(reply.uid, 0) + 1

    def drain(self) -> None:
        """把已经发出、还没收的回复收完（调度器退出前发出的都在路上）。"""
        while not self.recv.empty() or self.recv.socket.poll(200):
            self.pump()

    def stop(self) -> None:
        self.send.stop()
        self.recv.stop()


def prompts(seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 49152, (n,), generator=gen, dtype=torch.int32) for n in (9, 4, 14, 6, 11)]


MAX_TOKENS = [8, 10, 6, 40, 7]  # 第 3 个（下标 3）会在收到 2 个 token 后被取消


def play(player: Player, uid0: int) -> dict:
    """一轮流量。返回这一轮的 uid 说明，供断言使用。"""
    ps = prompts(14)

    def user(i: int) -> UserMsg:
        return UserMsg(uid0 + i, ps[i], SamplingParams(max_tokens=MAX_TOKENS[i], ignore_eos=True))

    too_long = UserMsg(uid0 + 9, torch.arange(75, dtype=torch.int32),
                       SamplingParams(max_tokens=10))  # 75 + 10 > max_seq_len 80
    # 头 4 个和一个太长的装进一帧：它们一定在同一步到达
    player.send.put(BatchBackendMsg([user(0), user(1), user(2), user(3), too_long]))
    late_sent = aborted = False
    done = {uid0 + i for i in (0, 1, 2, 4)}
    while not (done <= set(player.finished) and {uid0 + 9, uid0 + 1} <= set(player.rejects)):
        player.pump()
        if not late_sent and player.tokens.get(uid0):
            late_sent = True  # 在 decode 途中：一个新请求，和一个与在跑请求同号的请求
            player.send.put(user(4))
            player.send.put(UserMsg(uid0 + 1, ps[0], SamplingParams(max_tokens=3)))
        if not aborted and len(player.tokens.get(uid0 + 3, [])) >= 2:
            aborted = True
            player.send.put(AbortBackendMsg(uid0 + 3))
    player.send.put(ExitMsg())
    return dict(prompts=ps, finished=[uid0 + i for i in (0, 1, 2, 4)], aborted=uid0 + 3,
                too_long=uid0 + 9, duplicate=uid0 + 1)


def collect(results, kinds: dict[int, str]) -> dict[int, object]:
    got = {}
    while len(got) < len(kinds):
        rank, kind, payload = results.get(timeout=TIMEOUT_S)
        if kind == "error":
            pytest.fail(f"rank {rank} 出错：\n{payload}")
        assert kind == kinds[rank], (rank, kind, kinds[rank])
        got[rank] = payload
    return got


def start(ctx, target, args_per_rank, seeds=None):
    procs = []
    for rank, args in enumerate(args_per_rank):
        if seeds is not None:
            os.environ["PYTHONHASHSEED"] = str(seeds[rank])
        procs.append(ctx.Process(target=target, args=args, daemon=True))
        procs[-1].start()
    os.environ.pop("PYTHONHASHSEED", None)
    return procs


def finish(procs) -> list[int | None]:
    for p in procs:
        p.join(timeout=TIMEOUT_S)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    return codes


EARLY_ABORTS = range(1000, 1050)  # 调度器还没起来就排好的消息（uid 不存在，取消什么也不做）


@pytest.fixture(scope="module")
def servers():
    """三个调度器进程一起启动（加载模型的时间重叠）：

    - 单 rank、关掉重叠：跑一轮流量；
    - 两个 rank、重叠调度，哈希种子 0 和 1：同样的流量跑两轮，decode 顺序先 dict、后 set。
      启动之前先往 "backend" 排好 50 条消息：rank 0 握手一结束就把它们转发出去（迟到的订阅者）。
    """
    ctx = mp.get_context("spawn")
    dirs = [new_ipc_dir(), new_ipc_dir(), new_ipc_dir()]
    results = [ctx.Queue(), ctx.Queue(), ctx.Queue()]
    players = [Player(d) for d in dirs]
    go = ctx.Event()
    orders = ["dict", "set"]
    procs = []
    try:
        for uid in EARLY_ABORTS:  # 还没有人 bind：消息先在发件方排队
            players[1].send.put(AbortBackendMsg(uid))
        procs += start(ctx, serve, [(0, 1, dirs[0], False, ["dict"], results[0])])
        procs += start(ctx, serve, [(r, 2, dirs[1], True, orders, results[1]) for r in range(2)],
                       seeds=[0, 1])
        procs += start(ctx, receive_burst, [(r, dirs[2], go, results[2]) for r in range(2)])
        hf = compute_hf_reference()  # 和加载模型同时做

        single = dict(plan=play(players[0], uid0=0), player=players[0])
        single["report"] = collect(results[0], {0: "dict"})[0]
        players[0].drain()
        collect(results[0], {0: "exit"})

        rounds = {}
        for i, order in enumerate(orders):
            plan = play(players[1], uid0=100 * (i + 1))
            rounds[order] = dict(plan=plan, reports=collect(results[1], {0: order, 1: order}))
        players[1].drain()
        collect(results[1], {0: "exit", 1: "exit"})

        def push_burst():  # PUSH 到了它自己的高水位会阻塞（不丢），所以放在线程里
            for uid in range(BURST):
                players[2].send.put(AbortBackendMsg(uid))

        threading.Thread(target=push_burst, daemon=True).start()
        time.sleep(0.3)
        go.set()
        try:
            burst = collect(results[2], {0: "burst", 1: "burst"})
        except queue.Empty:  # 丢了帧的 rank 永远等下去：留给下面的测试报告
            burst = None
        codes = finish(procs)
        single["exitcodes"] = codes[:1]
        two = dict(rounds=rounds, player=players[1], exitcodes=codes[1:3])
        yield dict(single=single, two=two, hf=hf, burst=burst, burst_exitcodes=codes[3:])
    finally:
        finish(procs)
        for player, d in zip(players, dirs):
            player.stop()
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def single_rank(servers):
    return servers["single"]


@pytest.fixture(scope="module")
def two_ranks(servers):
    return servers["two"]


@pytest.fixture(scope="module")
def hf_reference(servers):
    return servers["hf"]


def compute_hf_reference():
    from minibook.hf import hf_greedy

    ps = prompts(14)
    return {i: hf_greedy(tiny_qwen3(), ps[i].tolist(), MAX_TOKENS[i]) for i in (0, 1, 2, 4)}


# ---------------------------------------------------------------- 单 rank


def test_single_rank_greedy_equals_hf(single_rank, hf_reference):
    player, plan = single_rank["player"], single_rank["plan"]
    assert single_rank["report"]["overlap"] is False
    for uid in plan["finished"]:
        assert player.tokens[uid] == hf_reference[uid], f"请求 {uid}"
        assert player.finished[uid] == 1


def test_single_rank_rejects_bad_requests_and_keeps_serving(single_rank):
    player, plan = single_rank["player"], single_rank["plan"]
    assert "max_seq_len" in player.rejects[plan["too_long"]]
    assert "uid 重复" in player.rejects[plan["duplicate"]]
    assert plan["too_long"] not in player.tokens
    # 同号的请求被拒绝，原来那个照常生成完
    assert len(player.tokens[plan["duplicate"]]) == MAX_TOKENS[1]


def test_single_rank_abort_returns_pages(single_rank):
    player, plan, report = single_rank["player"], single_rank["plan"], single_rank["report"]
    aborted = player.tokens[plan["aborted"]]
    assert 2 <= len(aborted) < MAX_TOKENS[3]
    assert plan["aborted"] not in player.finished
    assert report["integrity"] is None
    assert report["available"] == report["num_pages"]  # 没有请求在跑：每一页都拿得出来


def test_exit_msg_stops_cleanly(single_rank, two_ranks):
    assert single_rank["exitcodes"] == [0]
    assert two_ranks["exitcodes"] == [0, 0]


# ---------------------------------------------------------------- 两个 rank


def test_two_ranks_receive_identical_messages_and_batches(two_ranks):
    reports = two_ranks["rounds"]["dict"]["reports"]
    assert reports[0]["overlap"] and reports[1]["overlap"]
    assert reports[0]["received"] == reports[1]["received"]
    assert sum(len(r) for r in reports[0]["received"]) >= 5  # 确实收到了消息
    assert reports[0]["batches"] == reports[1]["batches"]
    assert any(phase == "decode" and len(rows) >= 4 for phase, rows in reports[0]["batches"])
    for rank in (0, 1):
        assert reports[rank]["integrity"] is None
        assert reports[rank]["available"] == reports[rank]["num_pages"]


def test_two_ranks_only_rank0_replies_and_outputs_equal_hf(two_ranks, hf_reference):
    player = two_ranks["player"]
    for order in ("dict", "set"):
        plan = two_ranks["rounds"][order]["plan"]
        uid0 = plan["finished"][0]
        for uid in plan["finished"]:  # 两个 rank 都回复的话，每个 token 会收到两次
            assert player.tokens[uid] == hf_reference[uid - uid0], f"{order} 轮请求 {uid}"
            assert player.finished[uid] == 1
        assert "max_seq_len" in player.rejects[plan["too_long"]]
        assert plan["aborted"] not in player.finished


def test_process_local_decode_order_breaks_agreement(two_ranks):
    reports = two_ranks["rounds"]["set"]["reports"]
    assert reports[0]["received"] == reports[1]["received"]  # 消息仍然一样
    a, b = reports[0]["batches"], reports[1]["batches"]
    assert len(a) == len(b)
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert differ, "decode 顺序取决于进程本地的哈希种子，两个 rank 的批应当不同"
    # 不同的只是顺序：同一步里是同一组请求
    for i in differ:
        assert a[i][0] == b[i][0] == "decode" and sorted(a[i][1]) == sorted(b[i][1])


# ---------------------------------------------------------------- 收发本身


def test_late_subscriber_misses_nothing(two_ranks):
    """50 条消息在调度器启动之前就排好了：rank 0 握手一结束就转发，rank 1 一条不少。"""
    received = two_ranks["rounds"]["dict"]["reports"]
    first_calls = [call for call in received[1]["received"] if call][:1]
    early = [m for call in received[1]["received"] for m in call if m[1] in EARLY_ABORTS]
    assert early == [("AbortBackendMsg", uid) for uid in EARLY_ABORTS]
    assert first_calls and first_calls[0][0] == ("AbortBackendMsg", EARLY_ABORTS[0])
    assert received[0]["received"] == received[1]["received"]


def test_burst_above_high_water_mark_reaches_every_rank(servers):
    """一步转发的帧超过 ZMQ 默认的高水位 1000：PUB 用默认值会丢帧，rank 1 就等一条不来的帧。"""
    steps = servers["burst"]
    assert steps is not None, f"{TIMEOUT_S} 秒内没有收完 {BURST} 条：有的 rank 在等丢掉的帧"
    assert steps[0] == steps[1]
    assert [uid for step in steps[0] for uid in step] == list(range(BURST))
    assert max(len(step) for step in steps[0]) > 1000  # 真的有一步超过了默认高水位
    assert servers["burst_exitcodes"] == [0, 0]


def test_without_ipc_dir_the_scheduler_has_no_io():
    """第 7–11 章的用法（自己调用 step()、不给 ipc_dir）在本章的树里照旧：不建收发，也不能 run_forever。"""
    sched = Scheduler(SchedulerConfig(model_path=tiny_qwen3(), num_page_override=32, max_seq_len_override=32))
    try:
        assert sched.io is None
        with pytest.raises(RuntimeError, match="ipc_dir"):
            sched.run_forever()
    finally:
        sched.shutdown()


def test_io_checks_its_arguments():
    config = SchedulerConfig(model_path="不加载模型")
    with pytest.raises(ValueError, match="ipc_dir"):
        _ = config.zmq_backend_addr
    with pytest.raises(ValueError, match="gloo"):
        SchedulerIO(SchedulerConfig(model_path="x", ipc_dir="/tmp"), DistributedInfo(0, 2), None)
