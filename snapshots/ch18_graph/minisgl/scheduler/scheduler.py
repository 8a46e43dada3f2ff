"""Scheduler：决定每一步算哪些请求，准备好输入交给 Engine，再把结果记回请求。

一步（step）按顺序做四件事，名字沿用上游：

    _schedule_next_batch   选请求：有排队的先 prefill，否则 decode 所有在跑的请求
    _prepare_batch         分配 KV 槽位，算 positions、输入/输出在 token 池里的下标、注意力元数据
    _forward               从 token 池取 input_ids，Engine 前向 + 采样，新 token 写回 token 池
    _process_last_data     等新 token 到 CPU，追加到请求上，判断结束，释放结束的请求

Engine 只管算；页表的行、KV 页、谁进这一批，都在这一侧决定。
KV 页由 CacheManager（cache.py）管：接纳时匹配前缀缓存并锁住，prefill 之后把算好的前缀
交给缓存，请求结束时还页；调度器空闲时核对页的账目。

重叠调度（默认打开）：一步先发出这一批的前向，再处理上一批的结果，CPU 上的
这些 Python 工作和前向同时进行。设 MINISGL_DISABLE_OVERLAP_SCHEDULING=1 关掉，每一步
当场处理自己的结果。重叠时一个请求的结果要晚一步才知道，四条规矩保证不出错：
  1. 结束与否按 CPU 上已经拿到的 token 数判断，不看（已经多走了一步的）device_len；
  2. 已经结束的请求可能还在已发出的那一批里：它在那一批的 token 直接丢掉；
  3. 结束或取消的请求，等包含它的最后一批做完，才还它的行和 KV 页（延迟释放）；
  4. 取消的请求不再处理它在途那一批的结果。

服务模式：run_forever() 反复"收消息 → 处理 → 走一步 → 发结果"，收发交给
SchedulerIO（io.py）。离线模式（LLM）没有收发，照旧由调用方一步步 step()。
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from minisgl.core import Batch, Req, SamplingParams
from minisgl.engine import BatchSamplingArgs, Engine, ForwardOutput, logprobs_per_req
from minisgl.env import ENV
from minisgl.message import (
    AbortBackendMsg,
    BaseBackendMsg,
    BatchBackendMsg,
    DetokenizeMsg,
    ExitMsg,
    RejectMsg,
    UserMsg,
)
from minisgl.utils import init_logger, to_device
from minisgl.utils.hf import load_tokenizer

from .cache import CacheManager
from .config import SchedulerConfig
from .decode import DecodeManager
from .io import SchedulerIO
from .prefill import ChunkedReq, PrefillManager
from .table import TableManager
from .utils import PendingReq, ReqOutput

logger = init_logger(__name__)

Index2D = tuple[torch.Tensor, torch.Tensor]  # (行号, 位置)：token 池 / 页表的二维下标


class ForwardInput(NamedTuple):
    batch: Batch
    sample_args: BatchSamplingArgs
    input_tuple: Index2D  # 这一步每个 token 在 token 池里的 (行, 位置)
    write_tuple: Index2D  # 每个请求的新 token 写回 token 池的 (行, 位置)


ForwardData = tuple[ForwardInput, ForwardOutput]  # 一批已经发出的前向：输入和（将来的）输出


class Scheduler:
    def __init__(self, config: SchedulerConfig, io: SchedulerIO | None = None) -> None:
        self.config = config
        self.engine = Engine(config)
        self.device = self.engine.device
        self.table_manager = TableManager(config.max_running_req, self.engine.page_table)
        self.token_pool = self.table_manager.token_pool
        self.cache_manager = CacheManager(
            self.engine.num_pages, config.page_size, self.engine.page_table, config.cache_type
        )
        self.page_allocator = self.cache_manager.allocator  # 同一个对象，少写一层
        self.decode_manager = DecodeManager()
        self.prefill_manager = PrefillManager(
            self.cache_manager, self.table_manager, self.decode_manager
        )
        self.prefill_budget = config.max_extend_tokens
        self.last_batch_chunked = False  # 上一批的最后一个请求是不是只算了一块
        self.tokenizer = load_tokenizer(config.model_path)
        self.eos_token_id: int = self.tokenizer.eos_token_id
        self.known_uids: set[int] = set()  # 排队中或在跑的请求
        # 重叠调度：读环境变量一次，之后不变
        self.overlap = not ENV.DISABLE_OVERLAP_SCHEDULING
        if self.overlap and self.engine.stream is None:
            self.engine.start_worker()  # CPU：前向交给工作线程，调度器线程接着干自己的
        self.inflight: ForwardData | None = None  # 已经发出、结果还没处理的那一批
        self.finished_reqs: set[Req] = set()  # 已经结束或取消、资源还没还的请求
        # 服务模式的收发：给了 ipc_dir 就按它建；测试和演示也可以自己传一个进来。
        # 离线模式（LLM）和没给 ipc_dir 的用法（调用方自己一步步 step()）没有收发
        if io is None and not config.offline_mode and config.ipc_dir is not None:
            io = SchedulerIO(config, config.tp_info, self.engine.tp_cpu_group)
        self.io = io

    # ------------------------------------------------------------------ 对外接口

    def add_req(self, uid: int, input_ids: torch.Tensor, sampling_params: SamplingParams) -> None:
        """收下一个请求（排进队尾）。这个请求本身有问题时抛 ValueError，别的请求不受影响。"""
        n, vocab = len(input_ids), self.engine.model_config.vocab_size
        if uid in self.known_uids:
            raise ValueError(f"请求 {uid}：uid 重复，已经有一个同号的请求在排队或在跑")
        if n == 0:
            raise ValueError(f"请求 {uid}：提示是空的，至少要有 1 个 token")
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab:
            raise ValueError(f"请求 {uid}：token id 必须在 [0, {vocab}) 之内")
        limit = self.engine.max_seq_len
        if n + sampling_params.max_tokens > limit:
            raise ValueError(
                f"请求 {uid}：提示 {n} 个 token + max_tokens {sampling_params.max_tokens} "
                f"超过了引擎能放下的 {limit} 个 token（max_seq_len）"
            )
        ids = input_ids.to(device="cpu", dtype=torch.int32)
        self.known_uids.add(uid)
        self.prefill_manager.add_one_req(PendingReq(uid, ids, sampling_params))

    def abort_req(self, uid: int) -> bool:
        """取消一个请求：排队中的直接拿掉，在跑的释放资源。返回是否找到了它。"""
        if (pending := self.prefill_manager.abort_req(uid)) is not None:
            if pending.chunked_req is None:  # 还没开始算：什么资源都没占
                self.known_uids.discard(uid)
            else:  # 算到一半：还回它占的行和页，uid 随资源一起注销（只注销一次）
                self._finish_req(pending.chunked_req)  # 在途时等那一批做完再还
            return True
        req = self.decode_manager.abort_req(uid) or self._find_inflight(uid)
        if req is None or req in self.finished_reqs:
            return False
        self._finish_req(req)  # 它可能还在已发出的那一批里：资源等那一批做完再还
        return True

    @property
    def runnable(self) -> bool:
        """还有事要做：排队的、在跑的请求，或者一批结果还没处理。"""
        return (self.prefill_manager.runnable or self.decode_manager.runnable
                or self.inflight is not None)

    def step(self) -> list[ReqOutput]:
        """调度一步，返回这一步处理完的结果。没有能跑的请求时做空闲时的事，返回空列表。

        重叠时：先发出这一批，再处理上一批（此时这一批正在前向）；不重叠时：当场处理这一批。
        """
        forward_input = self._schedule_next_batch()
        last, self.inflight = self.inflight, None
        if forward_input is not None:
            self.inflight = (forward_input, self._forward(forward_input))
        if not self.overlap:
            last, self.inflight = self.inflight, None
        if last is None:
            if self.inflight is None:  # 什么都没发出，也没有结果要处理：空闲
                self.run_when_idle()
            return []
        replies = self._process_last_data(last)
        if not self.runnable:  # 最后一个请求刚结束：趁空闲核对一次
            self.run_when_idle()
        return replies

    def run_when_idle(self) -> None:
        """没有请求可跑时调用：核对 KV 页的账目，漏还一页也会在这里报错。"""
        self.cache_manager.check_integrity()

    def shutdown(self) -> None:
        try:
            self.engine.synchronize()  # 等已经发出的前向做完（工作线程上出过错时，这里再抛一次）
            if self.io is not None:
                # 等所有 rank 都走到这里，再拆进程组。多机时不等：启动器的 SIGTERM 只到得了本机的 rank，
                # 别的机器上的 rank 要等 rank 0 的会合端口关掉才知道该停（见 server/launch.py）
                if self.config.nnodes == 1:
                    self.sync_all_ranks()
                self.io.stop()
        finally:
            self.engine.shutdown()  # 出了错也要收尾：不然这个进程里再也建不了新的 Engine

    # ------------------------------------------------------------------ 服务模式

    def run_forever(self) -> None:
        """服务模式的主循环：收消息 → 处理 → 走一步 → 发结果。收到 ExitMsg 时返回。

        有能跑的请求时只取已经到达的消息，不等；没有时先做空闲时的事，再阻塞地等。
        """
        if self.io is None:
            raise RuntimeError("这个调度器没有收发（离线模式，或 SchedulerConfig 没给 ipc_dir），"
                               "不能 run_forever")
        while True:
            msgs = self.io.receive_msg(blocking=not self.runnable, on_idle=self._on_idle)
            replies: list[DetokenizeMsg | RejectMsg] = []
            for msg in msgs:
                if not self._process_one_msg(msg, replies):  # ExitMsg：发完已有的结果就返回
                    self.io.send_result(replies)
                    return
            for out in self.step():
                replies.append(DetokenizeMsg(out.uid, out.next_token, out.finished,
                                             *(out.logprobs or ())))  # 没要 logprobs 时不带
            self.io.send_result(replies)

    def sync_all_ranks(self) -> None:
        """所有 rank 在这里碰头；单 rank 或离线时什么都不做。"""
        if self.io is not None:
            self.io.sync_all_ranks()

    def _process_one_msg(self, msg: BaseBackendMsg, replies: list) -> bool:
        """处理一条消息；要拒绝的请求往 replies 里加一条 RejectMsg。返回 False 表示该退出了。"""
        if isinstance(msg, BatchBackendMsg):
            for one in msg.data:
                if not self._process_one_msg(one, replies):
                    return False
        elif isinstance(msg, ExitMsg):
            return False
        elif isinstance(msg, UserMsg):
            try:
                self.add_req(msg.uid, msg.input_ids, msg.sampling_params)
            except ValueError as e:  # 这个请求本身有问题：告诉用户为什么，别的请求照常
                replies.append(RejectMsg(msg.uid, str(e)))
        elif isinstance(msg, AbortBackendMsg):
            if self.abort_req(msg.uid):
                logger.info_rank0("请求 %d 已取消", msg.uid)
        else:
            raise TypeError(f"调度器不认识这种消息：{type(msg).__name__}")
        return True

    def _on_idle(self) -> None:
        """阻塞地等消息之前：核对 KV 页，并把结果记一行日志（服务的测试靠它确认页都还了）。"""
        self.run_when_idle()
        cm = self.cache_manager
        cached = cm.prefix_cache.size_info.total_size // cm.page_size
        logger.info_rank0("调度器空闲：KV 页核对通过（空闲 %d + 前缀缓存 %d = 总数 %d）",
                          cm.allocator.num_free_pages, cached, cm.num_pages)

    # ------------------------------------------------------------------ 一步的四个阶段

    def _schedule_next_batch(self) -> ForwardInput | None:
        batch = None
        if self.config.decode_between_chunks and self.last_batch_chunked:
            # 两块之间先让在跑的请求 decode 一步，它们不必干等整段长提示算完
            batch = self.decode_manager.schedule_next_batch()
        # prefill 优先：新请求早一步进来，后面的 decode 批就更大
        batch = (batch or self.prefill_manager.schedule_next_batch(self.prefill_budget)
                 or self.decode_manager.schedule_next_batch())
        self.last_batch_chunked = batch is not None and isinstance(batch.reqs[-1], ChunkedReq)
        return self._prepare_batch(batch) if batch is not None else None

    def _prepare_batch(self, batch: Batch) -> ForwardInput:
        reqs = batch.reqs
        self.engine.graph_runner.pad_batch(batch)  # 走图的 decode 批补上占位请求，凑到录过的大小
        out_loc = self.cache_manager.allocate_paged(reqs)  # 页不够时先逐出缓存
        padding = batch.padded_size - batch.size
        if padding:  # 占位请求的 K/V 写进占位页（页表的最后一行指向它）
            out_loc = torch.cat([out_loc, self.engine.page_table[-1, :padding].to(out_loc.dtype)])
        batch.out_loc = out_loc
        rows, positions = _token_indices(batch.padded_reqs)
        batch.positions = to_device(positions, torch.int64, self.device)
        input_tuple = (to_device(rows, torch.int64, self.device), batch.positions)
        # 新 token 的位置是 device_len（complete_one 之前）。这一步已是最后一个 token 的请求
        # 不会再读它，写到最后一列 -1（永远读不到的位置），免得越过页表宽度。
        # 只算了一块的请求采样出的 token 没有意义，也写到 -1：device_len 那里是下一块的提示
        write_rows = [req.table_idx for req in reqs]
        write_pos = [req.device_len if req.can_decode and req.remain_len > 1 else -1
                     for req in reqs]
        write_tuple = (to_device(write_rows, torch.int64, self.device),
                       to_device(write_pos, torch.int64, self.device))
        self.engine.attn_backend.prepare_metadata(batch)
        return ForwardInput(batch, self.engine.sampler.prepare(batch), input_tuple, write_tuple)

    def _forward(self, forward_input: ForwardInput) -> ForwardOutput:
        batch, sample_args, input_tuple, write_tuple = forward_input
        # 取输入、前向、写回新 token：三件事按顺序排在 Engine 的流上（CPU 重叠时是工作线程）。
        # 取输入不能在调度器线程上当场做：上一批的新 token 可能还没写进 token 池
        self.engine.enqueue(_gather_input_ids, batch, self.token_pool, input_tuple)
        output = self.engine.forward_batch(batch, sample_args)  # 发射时已替每个请求 complete_one
        self.engine.enqueue(self.token_pool.index_put_, write_tuple, output.next_tokens)
        # 等事件就等到"新 token 写回 token 池"为止：之后这一批的行才能放心地还回去
        output.copy_done = self.engine.record_event()
        self.decode_manager.filter_reqs(batch.reqs)
        return output

    def _process_last_data(self, last_data: ForwardData) -> list[ReqOutput]:
        forward_input, output = last_data
        if output.copy_done is not None:  # 等这一批做完、新 token 到 CPU
            output.copy_done.synchronize()
        replies = []
        reqs = forward_input.batch.reqs
        logprobs = logprobs_per_req(output.logprobs, reqs)  # 没人要 logprobs 时全是 None
        for req, token, logprob in zip(reqs, output.next_tokens_cpu.tolist(), logprobs):
            if isinstance(req, ChunkedReq):  # 提示还没算完：token 丢掉，不回报，也不进前缀缓存
                continue
            if req in self.finished_reqs:  # 结束后多算的那一步（或已取消）：token 丢掉
                continue
            req.append_host(token)
            # 结束与否按 CPU 上已有的 token 判断：正好 max_tokens 个，或者采样到 EOS。
            # 不能看 req.can_decode：重叠时下一批已经发出，device_len 多走了一步
            finished = len(req.input_ids) == req.max_device_len or (
                token == self.eos_token_id and not req.sampling_params.ignore_eos)
            replies.append(ReqOutput(req.uid, token, finished, logprob))
            if finished:
                self._finish_req(req)
            elif forward_input.batch.is_prefill:  # 提示算完了：交给前缀缓存，别的请求能借用
                self.cache_manager.cache_req(req, finished=False)
        # 这一批做完了：等着它的已结束请求，只要不在刚发出的那一批里，现在就能还资源。
        # 按 uid 的顺序还：set 的迭代顺序取决于对象地址，每个 rank 都不同；还的顺序决定前缀缓存里
        # 叶子的时间戳，进而决定池子紧张时先逐出谁——各 rank 逐出的不同，之后的批就对不上
        for req in sorted((r for r in self.finished_reqs if not self._in_flight(r)), key=lambda r: r.uid):
            self._release_req(req)
        return replies

    def _find_inflight(self, uid: int) -> Req | None:
        """已经发出、还没处理的那一批里 uid 对应的请求。"""
        if self.inflight is None:
            return None
        return next((r for r in self.inflight[0].batch.reqs if r.uid == uid), None)

    def _in_flight(self, req: Req) -> bool:
        return self.inflight is not None and req in self.inflight[0].batch.reqs

    def _finish_req(self, req: Req) -> None:
        """请求结束（或被取消）：不再调度；还在已发出的那一批里时，资源等那一批做完再还。"""
        self.decode_manager.remove_req(req)
        self.finished_reqs.add(req)
        if not self._in_flight(req):
            self._release_req(req)

    def _release_req(self, req: Req) -> None:
        self.finished_reqs.remove(req)
        self._free_req_resources(req)

    def _free_req_resources(self, req: Req) -> None:
        # 算好的前缀交给缓存，这一行放下它持有的页（缓存还持有的页不会回到空闲栈）
        self.cache_manager.cache_req(req, finished=True)
        self.table_manager.free(req.table_idx)
        self.known_uids.discard(req.uid)


def _gather_input_ids(batch: Batch, token_pool: torch.Tensor, input_tuple: Index2D) -> None:
    batch.input_ids = token_pool[input_tuple]


def _token_indices(reqs: list[Req]) -> tuple[torch.Tensor, torch.Tensor]:
    """这一步每个 token 属于哪一行、在序列里的哪个位置，按请求顺序首尾相接（CPU 上算）。"""
    lens = torch.tensor([req.extend_len for req in reqs])
    starts = torch.tensor([req.cached_len for req in reqs])
    rows = torch.tensor([req.table_idx for req in reqs]).repeat_interleave(lens)
    # 第 i 个请求的 token：cached_len_i, cached_len_i + 1, ...
    offsets = torch.cumsum(lens, 0) - lens  # 每个请求的第一个 token 在整批里的下标
    positions = torch.arange(int(lens.sum())) - (offsets - starts).repeat_interleave(lens)
    return rows, positions
