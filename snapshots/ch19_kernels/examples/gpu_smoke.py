"""GPU 冒烟检查：几秒钟把第 6、11、16、18、19 章为 CUDA 写的路径都走一遍。没有 CUDA 时说明原因并以 0 退出。

CPU 上这些路径要么不存在（流、事件、锁页内存），要么退化成普通的拷贝，所以各章的测试
覆盖不到它们。有 GPU 时跑这一个脚本，检查：

1. Engine 调用了 torch.cuda.set_device，它的流是自己建的（不是默认流），并且是本卡的
   当前流（多卡时用最后一块卡，相当于 rank ≥ 1 的进程）；
2. 一步里的各个部件——分配槽位、注意力元数据、采样参数、前向加采样、还页——都不发生
   隐藏的同步（用 torch.cuda.set_sync_debug_mode 数出来，应当是 0 次）；
3. copy_done 完成之后，锁页内存里的 CPU 副本与设备上的 token 相同；
4. 一段批量贪心生成与 Hugging Face 逐 token 一致，页全部还回；
5. 第 11 章的重叠调度：调度器的准备和发出没有隐藏的同步，GPU 上不建工作线程（用流），
   重叠与不重叠的输出相同、都与 HF 一致；
6. 第 16 章的张量并行：NCCL 默认组加一个 gloo 控制组，通信插件的 all_reduce / all_gather /
   broadcast 在显存里的张量上结果正确；有两块以上的卡时，再起两个 rank 进程（TP=2，NCCL）
   贪心生成，与 HF 逐 token 相同。只有一块卡时 world size 是 1，走的仍是同一套代码；
7. 第 18 章的 CUDA 图：按 1、2、4 录图（从大到小、共用一个内存池，在 Engine 的流上录），
   decode 真的走了重放，输出与不录图时相同、与 HF 相同；再量一步 decode 重放和逐个内核发射的时间。
   （前 6 项里的 LLM / Engine 在 GPU 上也默认录图，所以它们同时检查了录图不改变结果。）
8. 第 19 章的自定义算子：本书的 C++ 线性层算子和量化只有 CPU 版，GPU 上 auto 选 torch（cuBLAS），
   要量化是一条中文错误；写 KV 池的算子在 GPU 上走 Python 登记的那份实现，写进去的值对。

    python examples/gpu_smoke.py          # 有 CUDA 时检查；没有时跳过
    python examples/gpu_smoke.py --cpu    # 在 CPU 上走一遍脚本本身（不检查 CUDA 的部分）
    MINISGL_MODEL=<模型目录> python examples/gpu_smoke.py   # 换一个模型（默认 SmolLM2）
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ch06_engine import MiniScheduler  # noqa: E402  本章 main 里的迷你调度器

from minisgl.core import SamplingParams  # noqa: E402
from minisgl.engine import Engine, EngineConfig  # noqa: E402

SYNC_WARNING = "synchronizing CUDA operation"  # set_sync_debug_mode("warn") 发出的警告里的字样


class Report:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.syncs: dict[str, int] = {}

    def check(self, ok: bool, what: str, detail: str = "") -> None:
        print(f"  {'✓' if ok else '✗'} {what}{'：' + detail if detail else ''}")
        if not ok:
            self.failed.append(what)

    @contextmanager
    def count_syncs(self, label: str, enabled: bool):
        """数出 with 块里发生了几次同步（只在 CUDA 上能数）。"""
        if not enabled:
            yield
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode("default")
        n = sum(SYNC_WARNING in str(w.message) for w in caught)
        self.syncs[label] = self.syncs.get(label, 0) + n


def watch(report: Report, obj: object, name: str, label: str, enabled: bool) -> None:
    """把 obj.name 包一层：每次调用都数同步次数。"""
    fn = getattr(obj, name)

    def wrapped(*args, **kwargs):
        with report.count_syncs(label, enabled):
            return fn(*args, **kwargs)

    setattr(obj, name, wrapped)


def check_overlap(report: Report, path, device: torch.device, on_cuda: bool,
                  prompts: list[list[int]], lengths: list[int]) -> None:
    """同一批请求，重叠开、关各跑一遍 LLM.generate；重叠时数出准备和发出里的同步次数。"""
    from minibook.hf import hf_greedy
    from minisgl.llm import LLM

    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in lengths]
    outputs = {}
    old = os.environ.get("MINISGL_DISABLE_OVERLAP_SCHEDULING")
    for overlap in (True, False):
        os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "0" if overlap else "1"
        llm = LLM(path, device=str(device), max_running_req=2, num_page_override=64, page_size=4,
                  max_seq_len_override=64)  # 只有 2 行：请求陆续进出，释放发生在有一批在途的时候
        if overlap:
            report.check(llm.overlap and (llm.engine.worker is None) == on_cuda,
                         "重叠模式：GPU 上用流，不建工作线程" if on_cuda else "重叠模式：CPU 上建了工作线程")
            watch(report, llm, "_schedule_next_batch", "Scheduler._schedule_next_batch（选批与准备）",
                  on_cuda)
            watch(report, llm, "_forward", "Scheduler._forward（取输入、前向、写回，只发出）", on_cuda)
        outputs[overlap] = [o["token_ids"] for o in llm.generate(prompts, params)]
        llm.cache_manager.check_integrity()  # 对不上会抛 RuntimeError
        report.check(not llm.finished_reqs and llm.table_manager.available_size == 2,
                     f"{'重叠' if overlap else '不重叠'}：行和页全部还回（check_integrity 通过）")
        llm.shutdown()
    if old is None:
        del os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"]
    else:
        os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = old
    if on_cuda:
        for label in ("Scheduler._schedule_next_batch（选批与准备）",
                      "Scheduler._forward（取输入、前向、写回，只发出）"):
            n = report.syncs.get(label, 0)
            report.check(n == 0, f"{label} 没有同步", f"{n} 次")
    report.check(outputs[True] == outputs[False], "重叠与不重叠的输出相同")
    report.check(all(out == hf_greedy(path, p, n) for out, p, n in zip(outputs[True], prompts, lengths)),
                 "重叠模式的输出与 HF 相同")


def check_communicator(report: Report, device: torch.device, on_cuda: bool) -> None:
    """world size 1 的进程组：CUDA 上 NCCL 默认组 + gloo 控制组（和 Engine._init_distributed 一样）。"""
    import socket
    from datetime import timedelta

    import torch.distributed as dist

    from minisgl.distributed import DistributedCommunicator, destroy_distributed
    from minisgl.distributed.impl import gather_into_one_tensor

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl" if on_cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1, timeout=timedelta(seconds=60))
    try:
        control = dist.new_group(backend="gloo")
        box = torch.tensor([7, -7])
        dist.all_reduce(box, op=dist.ReduceOp.MIN, group=control)  # 控制组只收 CPU 上的张量
        report.check(box.tolist() == [7, -7] and dist.get_backend(control) == "gloo",
                     "控制组在 CPU 张量上 all_reduce", f"控制组 {dist.get_backend(control)}，默认组 {dist.get_backend()}")
        comm = DistributedCommunicator()
        x = torch.randn(3, 5, device=device)
        report.check(torch.equal(comm.all_reduce(x.clone()), x), "all_reduce（world size 1）")
        report.check(gather_into_one_tensor(), "all_gather 收进一个张量（这个后端支持）")
        gathered = comm.all_gather(x)
        report.check(gathered.device == device and torch.equal(gathered, x), "all_gather 在本卡上")
        report.check(torch.equal(comm.broadcast(x.clone()), x), "broadcast")
    finally:
        destroy_distributed()


def _tp2_rank(rank: int, port: int, path: str, prompts: list, lengths: list, out) -> None:
    from minisgl.distributed import DistributedInfo
    from minisgl.llm import LLM

    llm = LLM(path, tp_info=DistributedInfo(rank, 2), distributed_port=port, device=f"cuda:{rank}",
              num_page_override=256, max_seq_len_override=64)
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n) for n in lengths])
    out.put((rank, [o["token_ids"] for o in outs], llm.engine.tp_cpu_group is not None))
    llm.shutdown()


def check_tp2_engine(report: Report, path, prompts: list, lengths: list) -> None:
    """两块卡、两个进程：真实的 NCCL 张量并行，贪心输出与 HF 相同。"""
    import socket

    import torch.multiprocessing as mp

    from minibook.hf import hf_greedy

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_tp2_rank, args=(r, port, str(path), prompts, lengths, out))
             for r in range(2)]
    for p in procs:
        p.start()
    got = dict((r, (tokens, group)) for r, tokens, group in (out.get(timeout=600) for _ in procs))
    for p in procs:
        p.join(timeout=60)
    want = [hf_greedy(path, prompt, n) for prompt, n in zip(prompts, lengths)]
    report.check(got[0][0] == got[1][0] == want, "TP=2（NCCL）的贪心输出两个 rank 相同、与 HF 相同")
    report.check(got[0][1] and got[1][1], "每个 rank 都有 gloo 控制组")


def check_graphs(report: Report, path, device: torch.device, on_cuda: bool,
                 prompts: list[list[int]], lengths: list[int]) -> None:
    """同一批请求，录图（1、2、4）与不录各跑一遍；再用 1 个请求量 decode 一步的时间。"""
    from minibook.hf import hf_greedy
    from minisgl.llm import LLM

    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in lengths]
    outputs, step_ms = {}, {}
    for graph in (True, False):
        llm = LLM(path, device=str(device), max_running_req=4, num_page_override=256, page_size=4,
                  max_seq_len_override=128, cuda_graph_max_bs=4 if graph else 0)
        runner = llm.engine.graph_runner
        replays = []
        replay = runner.replay
        runner.replay = lambda batch: (replays.append(batch.padded_size), replay(batch))[1]
        outputs[graph] = [o["token_ids"] for o in llm.generate(prompts, params)]
        if graph:
            report.check(runner.bs_list == [1, 2, 4], "录图的批大小", str(runner.bs_list))
            if on_cuda:
                report.check(sorted(runner._graphs) == [1, 2, 4], "录了 3 份 CUDA 图")
            report.check(set(replays) >= {4, 2, 1}, "decode 走了重放（批 3 补到 4）", str(sorted(set(replays))))
            print(f"  录图用了 {runner.capture_seconds:.1f} 秒")
        else:
            report.check(not replays, "cuda_graph_max_bs=0 时不录图、不重放")
        # 量 decode：1 个请求生成 64 个 token，减掉只生成 1 个（只有 prefill）的时间。
        # --cpu 只走一遍这段代码（CPU 的数字在第 18 章），8 个 token 就够
        decode = 64 if on_cuda else 8
        one = [prompts[0]]
        llm.generate(one, SamplingParams(max_tokens=8, ignore_eos=True))  # 预热
        times = []
        for n in (1, 1 + decode, 1, 1 + decode):
            if on_cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            llm.generate(one, SamplingParams(max_tokens=n, ignore_eos=True))
            times.append(time.perf_counter() - start)
        step_ms[graph] = ((times[1] - times[0]) + (times[3] - times[2])) / 2 / decode * 1e3
        llm.shutdown()
    report.check(outputs[True] == outputs[False], "录图与不录图的输出相同")
    report.check(all(out == hf_greedy(path, p, n) for out, p, n in zip(outputs[True], prompts, lengths)),
                 "录图时的输出与 HF 相同")
    print(f"  一步 decode（批 1，含调度）：不录图 {step_ms[False]:.2f} ms，录图 {step_ms[True]:.2f} ms，"
          f"快 {step_ms[False] / step_ms[True]:.2f} 倍")


def check_kernels(report: Report, device: torch.device, on_cuda: bool) -> None:
    """线性层选哪种实现；写 KV 池的算子在这块设备上写对了没有。"""
    from minisgl.kvcache import MHAKVCachePool
    from minisgl.layers.quant import resolve_cpu_kernels

    expected = "torch" if on_cuda else "cpp"
    got = resolve_cpu_kernels("auto", None, device, torch.float32)
    report.check(got == expected, f"cpu_kernels=auto 在 {device.type} 上选 {expected}", got)
    if on_cuda:
        try:
            resolve_cpu_kernels("auto", "int8", device, torch.float32)
            report.check(False, "GPU 上要量化应当报错")
        except ValueError as e:
            report.check("只有 CPU" in str(e), "GPU 上要量化是一条中文错误", str(e))
    pool = MHAKVCachePool(2, 3, 8, 16, 1, torch.float32, device)
    pool.kv_buffer.zero_()  # 池子是 torch.empty 建的：先清零，才看得出“别处没动”
    k, v = torch.randn(4, 2, 8, device=device), torch.randn(4, 2, 8, device=device)
    loc = torch.tensor([5, 0, 15, 9], dtype=torch.int32, device=device)
    pool.store_kv(k, v, loc, 1)
    ok = torch.equal(pool.k_cache(1)[loc.long()], k) and torch.equal(pool.v_cache(1)[loc.long()], v)
    report.check(ok and int(pool.k_cache(0).abs().sum()) == 0, "store_kv 写进了这一层的这几个槽位，别处没动")


def check_cuda_kernels(report: Report, device: torch.device, on_cuda: bool) -> None:
    """kernel/cuda/kernels.cu：nvcc 编译、登记到 CUDA 分派键；RMSNorm 两个算子和 torch 写法比，store_kv 写对。"""
    if not on_cuda:
        print("  没有 GPU：跳过 CUDA 版本的算子（kernel/cuda/kernels.cu）")
        return
    from minisgl.kernel import load_cuda_kernels
    from minisgl.kvcache import MHAKVCachePool
    from minisgl.layers.norm import rms_norm

    started = time.perf_counter()
    load_cuda_kernels()
    print(f"  load_cuda_kernels() 用了 {time.perf_counter() - started:.1f} 秒")
    for op in ("rms_norm", "add_rms_norm", "store_kv"):
        table = torch._C._dispatch_dump_table(f"minisgl::{op}")
        cuda_line = next((line for line in table.splitlines() if line.startswith("CUDA:")), "")
        report.check("kernels.cu" in cuda_line, f"minisgl::{op} 的 CUDA 实现来自 kernels.cu", cuda_line)
    ops = torch.ops.minisgl
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        for rows, hidden in ((1, 576), (7, 1024), (64, 4096)):
            x = torch.randn(rows, hidden, device=device, dtype=dtype)
            r = torch.randn(rows, hidden, device=device, dtype=dtype)
            w = torch.rand(hidden, device=device, dtype=dtype) + 0.5
            want = rms_norm(x, w, 1e-6)
            got = ops.rms_norm(x, w, 1e-6)
            err = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
            normed, summed = ops.add_rms_norm(x, r, w, 1e-6)
            err2 = ((normed.float() - rms_norm(x + r, w, 1e-6).float()).abs().max()).item()
            report.check(err < tol and err2 < tol * 10 and torch.equal(summed, x + r),
                         f"CUDA rms_norm / add_rms_norm {str(dtype)[6:]} [{rows}, {hidden}] 和 torch 写法一致",
                         f"{err:.1e} / {err2:.1e}")
    pool = MHAKVCachePool(2, 3, 8, 64, 1, torch.bfloat16, device)
    pool.kv_buffer.zero_()
    k = torch.randn(5, 2, 8, device=device, dtype=torch.bfloat16)
    v = torch.randn(5, 2, 8, device=device, dtype=torch.bfloat16)
    loc = torch.tensor([63, 0, 17, 5, 40], dtype=torch.int32, device=device)
    pool.store_kv(k, v, loc, 2)
    torch.cuda.synchronize(device)
    ok = torch.equal(pool.k_cache(2)[loc.long()], k) and torch.equal(pool.v_cache(2)[loc.long()], v)
    report.check(ok and int(pool.k_cache(1).float().abs().sum()) == 0, "CUDA store_kv（bfloat16）写对了槽位，别处没动")


def main() -> int:
    parser = argparse.ArgumentParser(description="GPU 冒烟检查（第 6、11、16、18、19 章）")
    parser.add_argument("--cpu", action="store_true",
                        help="在 CPU 上走一遍脚本本身，不检查 CUDA 的部分")
    args = parser.parse_args()
    on_cuda = not args.cpu
    if on_cuda and not torch.cuda.is_available():
        print("这台机器上没有可用的 CUDA 设备：跳过 GPU 冒烟检查。")
        print("CPU 上的路径由各章的测试覆盖；有 GPU 时再运行 python examples/gpu_smoke.py。")
        return 0

    from minibook.hf import encode, hf_greedy
    from minibook.models import default_model

    started = time.perf_counter()
    device = torch.device("cuda", torch.cuda.device_count() - 1) if on_cuda else torch.device("cpu")
    name = torch.cuda.get_device_name(device) if on_cuda else "只走脚本逻辑"
    print(f"设备：{device}（{name}）")
    report = Report()
    path = default_model()  # SmolLM2；设了 $MINISGL_MODEL 就用那个模型目录（比如带不走几百 MB 权重的 GPU 机器上）
    print(f"模型：{path.name}")
    engine = Engine(EngineConfig(model_path=path, device=str(device), max_running_req=4,
                                 num_page_override=64, page_size=4, max_seq_len_override=64))

    print("1. 设备与流")
    if on_cuda:
        report.check(torch.cuda.current_device() == device.index, "Engine 调用了 set_device",
                     f"当前设备 cuda:{torch.cuda.current_device()}")
        report.check(engine.stream == torch.cuda.current_stream(device),
                     "engine.stream 是本卡的当前流")
        report.check(engine.stream != torch.cuda.default_stream(device),
                     "engine.stream 是自己建的流，不是默认流（默认流和别的流隐式同步）")
        report.check(engine.sampler.generator.device == device, "采样器的 Generator 在本卡上")
    report.check(engine.page_table.device == device and engine.kv_cache.kv_buffer.device == device,
                 "页表与 KV 池在本卡上")

    print("2. 一步里没有隐藏的同步")
    sched = MiniScheduler(engine)
    watch(report, sched.allocator, "alloc_slots", "PageAllocator.alloc_slots", on_cuda)
    watch(report, sched.allocator, "free_slots", "PageAllocator.free_slots", on_cuda)
    watch(report, engine.attn_backend, "prepare_metadata", "attn_backend.prepare_metadata", on_cuda)
    watch(report, engine.sampler, "prepare", "Sampler.prepare", on_cuda)
    watch(report, engine, "forward_batch", "Engine.forward_batch（前向 + 采样）", on_cuda)

    texts = ["The capital of France is", "def fibonacci(n):", "Water boils at"]
    prompts = [encode(path, t) for t in texts]
    lengths = [8, 6, 4]
    outputs, sizes = sched.generate(prompts, [SamplingParams(max_tokens=n) for n in lengths])
    # 一批混着采样和贪心的请求：走 Sampler.prepare 的锁页内存、采样器里的 exponential_ / argmax
    mixed = [SamplingParams(temperature=0.8, top_k=20, top_p=0.9, max_tokens=4),
             SamplingParams(max_tokens=4)]
    mixed_out, _ = sched.generate(prompts[:2], mixed)
    if on_cuda:
        for label, n in report.syncs.items():
            report.check(n == 0, f"{label} 没有同步", f"{n} 次")

    print("3. CPU 副本与事件")
    req = sched.add(prompts[0], SamplingParams(max_tokens=2), uid=0)
    batch = sched.prepare_batch([req], "prefill")
    out = engine.forward_batch(batch, engine.sampler.prepare(batch))
    if on_cuda:
        report.check(isinstance(out.copy_done, torch.cuda.Event), "copy_done 是一个 CUDA 事件")
        report.check(out.next_tokens_cpu.is_pinned(), "CPU 副本在锁页内存里（异步拷贝的目标）")
        out.copy_done.synchronize()
    report.check(out.next_tokens_cpu.tolist() == out.next_tokens.cpu().tolist(),
                 "事件完成后 CPU 副本与设备上的 token 相同")
    sched.allocator.free_slots(req.table_idx, req.cached_len)
    sched.table.free(req.table_idx)

    print("4. 与 Hugging Face 一致")
    for text, prompt, got, n in zip(texts, prompts, outputs, lengths):
        report.check(got == hf_greedy(path, prompt, n), f"{text!r} 生成 {n} 个 token 与 HF 相同")
    report.check(mixed_out[1] == hf_greedy(path, prompts[1], 4), "混合批里的贪心请求与 HF 相同")
    report.check(sched.allocator.num_free_pages == engine.num_pages, "页全部还回",
                 f"{sched.allocator.num_free_pages} / {engine.num_pages}")
    report.check(sizes == [3, 3, 3, 3, 2, 2, 1, 1], "批大小随请求结束变小", str(sizes))
    engine.shutdown()

    print("5. 重叠调度（第 11 章）")
    check_overlap(report, path, device, on_cuda, prompts, lengths)

    print("6. 张量并行（第 16 章）")
    check_communicator(report, device, on_cuda)
    if on_cuda and torch.cuda.device_count() >= 2:
        check_tp2_engine(report, path, prompts, lengths)
    elif on_cuda:
        print("  只有一块卡：跳过两个 rank 的生成（需要 ≥ 2 块卡）")

    print("7. 图捕获（第 18 章）")
    check_graphs(report, path, device, on_cuda, prompts, lengths)

    print("8. 自定义算子（第 19 章）")
    check_kernels(report, device, on_cuda)
    check_cuda_kernels(report, device, on_cuda)

    elapsed = time.perf_counter() - started
    if report.failed:
        print(f"失败 {len(report.failed)} 项（{elapsed:.1f} 秒）：{'；'.join(report.failed)}")
        return 1
    print(f"全部通过（{elapsed:.1f} 秒）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
