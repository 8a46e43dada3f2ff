"""第 18 章的测量：一步 decode 逐个算子执行 vs 编译好的那份，批大小 1/8/32；编译要多久（冷、热缓存）。

一步 decode 的两种跑法在同一个引擎、同一批请求上轮流量：每一步先后各跑一遍（写进 KV 池的是同样的
K/V，贪心采样出同样的 token），所以两者看到的上下文长度、内存状态完全一样。
直接运行打印全部结果：python examples/ch18_bench.py
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from ch17_bench import native_stderr_muted
from minibook.models import smollm2
from minisgl.core import SamplingParams
from minisgl.llm import LLM

BATCHES = (1, 8, 32)
CONTEXT = 256  # 每个请求的提示长度
STEPS = 12  # 每个批大小量几步 decode（前 2 步不算：第一次跑会分配内存、预热缓存）
TREE = Path(__file__).resolve().parents[1]


@contextmanager
def no_overlap():
    """不重叠：每一步当场算完，计时才准。离开时恢复原来的设置（notebook 里之后的单元还要用）。"""
    key = "MINISGL_DISABLE_OVERLAP_SCHEDULING"
    old = os.environ.get(key)
    os.environ[key] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ[key]
        else:
            os.environ[key] = old


def step_times(batches=BATCHES, context: int = CONTEXT, steps: int = STEPS) -> tuple[list[dict], bool, int]:
    """每个批大小：逐个算子和编译后一步 decode（前向 + 采样）的中位数（ms），以及两者的 token 是否相同。"""
    longest = context + steps + 2
    with no_overlap():
        llm = LLM(smollm2(), cuda_graph_bs=tuple(batches), max_running_req=max(batches),
                  num_page_override=max(batches) * longest + 8, max_seq_len_override=longest)
    engine, runner = llm.engine, llm.engine.graph_runner
    forward = engine._forward_and_sample
    times: dict[int, dict[str, list[float]]] = {}
    same = []

    def measured(batch, args, out=None):
        if not runner.can_replay(batch):  # prefill：照常
            return forward(batch, args, out)
        got = {}
        order = ("eager", "compiled") if len(same) % 2 == 0 else ("compiled", "eager")
        for mode in order:
            runner.can_replay = (lambda b: False) if mode == "eager" else type(runner).can_replay.__get__(runner)
            start = time.perf_counter()
            got[mode] = forward(batch, args).clone()
            times.setdefault(batch.size, {}).setdefault(mode, []).append(time.perf_counter() - start)
        del runner.can_replay  # 回到类上的方法
        same.append(torch.equal(got["eager"], got["compiled"]))
        return got["compiled"] if out is None else out.copy_(got["compiled"])

    engine._forward_and_sample = measured
    rng = random.Random(0)
    for batch in batches:
        prompts = [[rng.randrange(1000, 40000) for _ in range(context)] for _ in range(batch)]
        llm.generate(prompts, SamplingParams(max_tokens=steps + 1, ignore_eos=True))
    compiles = runner.compiles
    llm.shutdown()
    rows = []
    for batch in batches:
        t = times[batch]
        eager = statistics.median(t["eager"][2:]) * 1e3
        compiled = statistics.median(t["compiled"][2:]) * 1e3
        rows.append({"batch": batch, "eager_ms": eager, "compiled_ms": compiled})
    assert compiles == len(batches), f"量的时候又编译了：{compiles} 次"
    return rows, all(same), len(same)


def step_profile(context: int = CONTEXT) -> dict:
    """批大小 1 的一步 decode，逐个算子和编译后各用 torch.profiler 记一遍：算子调用数、矩阵乘的时间。"""
    from torch.profiler import ProfilerActivity, profile

    with no_overlap():
        llm = LLM(smollm2(), cuda_graph_bs=(1,), max_running_req=1, num_page_override=context + 64,
                  max_seq_len_override=context + 32)
    engine, runner = llm.engine, llm.engine.graph_runner
    forward = engine._forward_and_sample
    result: dict[str, dict] = {}
    decode_steps = []

    def profiled(batch, args, out=None):
        if not runner.can_replay(batch):
            return forward(batch, args, out)
        decode_steps.append(batch)
        if len(decode_steps) == 4:  # 前几步预热
            for mode in ("eager", "compiled"):
                runner.can_replay = (lambda b: False) if mode == "eager" else type(runner).can_replay.__get__(runner)
                with native_stderr_muted(), profile(activities=[ProfilerActivity.CPU]) as prof:
                    start = time.perf_counter()
                    forward(batch, args)
                    total = time.perf_counter() - start
                del runner.can_replay
                events = [e for e in prof.events() if e.name.startswith("aten::")]
                top = [e for e in events if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
                result[mode] = {"aten_calls": len(top), "total_ms": total * 1e3,
                                "mm_ms": sum(e.cpu_time_total for e in top if e.name in ("aten::mm", "aten::addmm",
                                                                                       "aten::linear")) / 1e3}
        return forward(batch, args, out)

    engine._forward_and_sample = profiled
    prompt = [random.Random(1).randrange(1000, 40000) for _ in range(context)]
    llm.generate([prompt], SamplingParams(max_tokens=8, ignore_eos=True))
    llm.shutdown()
    return result


def in_subprocess(code: str, **env: str) -> str:
    """在这一章的树里起一个新的 Python 进程跑 code，返回它打印的最后一行。"""
    full_env = {**os.environ, **env,
                "PYTHONPATH": os.pathsep.join([str(TREE), str(TREE / "examples"), str(TREE.parents[1] / "tools"),
                                               os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def cpp_wrapper_step(batch: int = 1) -> dict:
    """同样的测量，但 inductor 用 C++ 写“调用各个内核”的那层外壳（TORCHINDUCTOR_CPP_WRAPPER=1）。
    这个开关在 inductor 导入时读，所以在新进程里量。"""
    import json

    code = f"import json; from ch18_bench import step_times; print(json.dumps(step_times(({batch},))[0][0]))"
    return json.loads(in_subprocess(code, TORCHINDUCTOR_CPP_WRAPPER="1"))


def indexing_store_step(batch: int = 1) -> dict:
    """对照：把写 KV 池换回第 17 章的写法（在这一层的视图上按下标赋值），同样量一遍。在新进程里量，
    不影响这个进程里已经编译好的东西。"""
    import json

    code = ("import json\n"
            "from minisgl.kvcache.mha_pool import MHAKVCachePool\n"
            "def store_kv(self, k, v, out_loc, layer_id):\n"
            "    self.k_cache(layer_id)[out_loc] = k\n"
            "    self.v_cache(layer_id)[out_loc] = v\n"
            "MHAKVCachePool.store_kv = store_kv\n"
            f"from ch18_bench import step_times; print(json.dumps(step_times(({batch},))[0][0]))")
    return json.loads(in_subprocess(code))


def compile_seconds(batches=BATCHES, cache_dir: str | None = None) -> float:
    """在一个新进程里建引擎、编译这几个批大小，返回编译花的秒数。

    cache_dir 是 inductor 的磁盘缓存（TORCHINDUCTOR_CACHE_DIR）：空目录就是冷缓存，第二次用同一个目录就是热的。
    """
    code = ("from minibook.models import smollm2; from minisgl.llm import LLM\n"
            f"llm = LLM(smollm2(), cuda_graph_bs={tuple(batches)!r}, max_running_req={max(batches)}, "
            "num_page_override=4096, max_seq_len_override=512)\n"
            "print(llm.engine.graph_runner.capture_seconds); llm.shutdown()")
    env = {} if cache_dir is None else {"TORCHINDUCTOR_CACHE_DIR": cache_dir}
    return float(in_subprocess(code, **env))


def main() -> None:
    import tempfile

    torch.set_num_threads(min(2, torch.get_num_threads()))
    print(f"SmolLM2，float32，{torch.get_num_threads()} 个线程，每个请求 {CONTEXT} 个 token 的提示")
    rows, same, steps = step_times()
    for r in rows:
        print(f"批 {r['batch']:>2}：逐个算子 {r['eager_ms']:6.1f} ms   编译后 {r['compiled_ms']:6.1f} ms   "
              f"快 {r['eager_ms'] / r['compiled_ms']:.2f} 倍")
    print(f"两种跑法的 {steps} 步 token 全部相同：{same}")
    r = cpp_wrapper_step()
    print(f"批  1，C++ 外壳：逐个算子 {r['eager_ms']:6.1f} ms   编译后 {r['compiled_ms']:6.1f} ms   "
          f"快 {r['eager_ms'] / r['compiled_ms']:.2f} 倍")
    with tempfile.TemporaryDirectory() as cache:
        cold = compile_seconds(cache_dir=cache)
        warm = compile_seconds(cache_dir=cache)
    print(f"编译批大小 {BATCHES}：冷缓存 {cold:.1f} 秒，热缓存 {warm:.1f} 秒")
    print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")


if __name__ == "__main__":
    main()
