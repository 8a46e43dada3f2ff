"""第 1 章：核心数据结构。

不用模型、不用 GPU，只用 minisgl.core 里的几个类走一遍请求的一生：
长度怎样随 prefill 和 decode 变化，请求怎样拼成批次，前向时怎样通过 Context 拿到批次。
"下一个 token"由一个假模型给出：它只把每个请求最后一个 token 加 1。
"""

from __future__ import annotations

import os
import unicodedata

import torch

from minisgl.core import Batch, Context, Req, SamplingParams, get_global_ctx, set_global_ctx
from minisgl.env import ENV, EnvError
from minisgl.utils import div_ceil, div_even


def make_req(uid: int, prompt: list[int], max_tokens: int, cached_len: int = 0) -> Req:
    params = SamplingParams(max_tokens=max_tokens)
    return Req(
        input_ids=torch.tensor(prompt, dtype=torch.int32),
        table_idx=uid,  # 这里让页表行号等于 uid；真实引擎由 TableManager 分配（第 7 章）
        cached_len=cached_len,
        output_len=params.max_tokens,
        uid=uid,
        sampling_params=params,
        cache_handle=None,
    )


def make_positions(batch: Batch) -> torch.Tensor:
    """每个请求这一步要算的位置是 [cached_len, device_len)，按顺序拼成一维。"""
    parts = [torch.arange(r.cached_len, r.device_len, dtype=torch.int32) for r in batch.padded_reqs]
    return torch.cat(parts)


def make_input_ids(batch: Batch) -> torch.Tensor:
    """与 positions 一一对应的 token id（真实引擎从设备上的 token pool 里取，第 7 章）。"""
    return torch.cat([r.input_ids[r.cached_len : r.device_len] for r in batch.padded_reqs])


def prepare(batch: Batch) -> Batch:
    """调度器在前向之前要做的事的一个缩影：填好 Batch 的几个字段。"""
    batch.padded_reqs = batch.reqs  # 不补齐
    batch.positions = make_positions(batch)
    batch.input_ids = make_input_ids(batch)
    assert len(batch.input_ids) == len(batch.positions) == sum(r.extend_len for r in batch.reqs)
    return batch


def fake_model_forward() -> torch.Tensor:
    """假模型：和真模型一样不带参数，从全局上下文读当前批次；返回每个请求的下一个 token。"""
    batch = get_global_ctx().batch
    ends = torch.tensor([r.extend_len for r in batch.padded_reqs]).cumsum(0) - 1
    return batch.input_ids[ends] + 1  # 每个请求这一步最后一个 token，加 1


def run_one_step(ctx: Context, batch: Batch) -> list[int]:
    """一步：像 Engine 那样发出前向并立刻记账，再像调度器那样等新 token 回到 CPU 后追加。"""
    with ctx.forward_batch(batch):
        next_tokens = fake_model_forward()  # 真实引擎里这里只是把计算排进设备的队列
        for req in batch.reqs:
            req.complete_one()  # 发出即记账：不等新 token
    tokens = next_tokens[: batch.size].tolist()  # 拷回 CPU（真实引擎里要等设备算完）
    for req, token in zip(batch.reqs, tokens):
        req.append_host(token)
    return tokens


def width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(width(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  " + "  ".join(c + " " * (w - width(c)) for c, w in zip(row, widths)).rstrip())


def lengths(req: Req) -> list[object]:
    return [req.cached_len, req.device_len, req.extend_len, req.remain_len]


LEN_HEADERS = ["cached_len", "device_len", "extend_len", "remain_len"]


def section_requests() -> None:
    print("一、三个请求，提示长度不同")
    reqs = [make_req(0, [11, 12, 13], 4), make_req(1, list(range(21, 28)), 2),
            make_req(2, [31, 32, 33, 34, 35], 3)]
    rows = [[r.uid, len(r.input_ids), r.output_len, *lengths(r), r.max_device_len] for r in reqs]
    print_table(["uid", "提示长度", "output_len", *LEN_HEADERS, "max_device_len"], rows)
    for r in reqs:
        # 刚创建时：没有缓存，整段提示都要算；还能生成的就是 output_len 个
        assert r.cached_len == 0 and r.extend_len == len(r.input_ids)
        assert r.remain_len == r.output_len and r.max_device_len == r.device_len + r.output_len
    print(f"  repr：{reqs[0]!r}")
    print()


def section_lifetime(ctx: Context) -> None:
    print("二、请求 0 的一生：1 次 prefill，之后每步 decode 一个 token")
    req = make_req(0, [11, 12, 13], max_tokens=4)
    rows = [["创建时", "", "", *lengths(req)]]
    phase = "prefill"
    while True:
        batch = prepare(Batch(reqs=[req], phase=phase))
        computed = batch.positions.tolist()
        before = req.device_len
        (token,) = run_one_step(ctx, batch)
        assert req.cached_len == before and req.device_len == before + 1  # complete_one 的定义
        assert len(req.input_ids) == req.device_len and int(req.input_ids[-1]) == token
        rows.append([phase, computed, token, *lengths(req)])
        if not req.can_decode:
            break
        phase = "decode"
    print_table(["步骤", "这一步算的位置", "新 token", *LEN_HEADERS], rows)
    print("  （右边四列是这一步完成、调用 complete_one() 之后的值）")
    print(f"  生成的 token：{req.input_ids[3:].tolist()}，正好 output_len = {req.output_len} 个")
    print("  注意：最后一个新 token 采样出来就结束了，它从没被送进模型，所以 cached_len 比 "
          "device_len 少 1。")
    assert req.remain_len == 0 and req.device_len == req.max_device_len
    assert req.input_ids[3:].tolist() == [14, 15, 16, 17]
    print()


def section_batches(ctx: Context) -> None:
    print("三、Batch：几个请求拼成一次前向")
    shared = [41, 42, 43, 44, 45]  # 请求 2 和一个早先的请求有相同的前 5 个 token
    reqs = [make_req(0, [11, 12, 13], 4), make_req(1, [21, 22], 2),
            make_req(2, shared + [46, 47, 48], 3, cached_len=len(shared))]
    batch = prepare(Batch(reqs=reqs, phase="prefill"))
    print(f"  {batch}：请求 2 命中了 {reqs[2].cached_len} 个 token 的前缀缓存，只算剩下的 "
          f"{reqs[2].extend_len} 个")
    print(f"    各请求 extend_len：{[r.extend_len for r in reqs]}")
    print(f"    input_ids：{batch.input_ids.tolist()}")
    print(f"    positions：{batch.positions.tolist()}")
    assert batch.positions.tolist() == [0, 1, 2, 0, 1, 5, 6, 7]
    run_one_step(ctx, batch)

    step = 1
    running = [r for r in reqs if r.can_decode]
    while running:
        batch = prepare(Batch(reqs=running, phase="decode"))
        assert all(r.extend_len == 1 for r in running)  # decode：每个请求只算 1 个 token
        tokens = run_one_step(ctx, batch)
        done = [r.uid for r in running if not r.can_decode]
        print(f"  decode 第 {step} 步：uids={[r.uid for r in running]}，"
              f"positions={batch.positions.tolist()}，新 token={tokens}，已结束：{done}")
        running = [r for r in running if r.can_decode]
        step += 1
    for r in reqs:  # 每个请求都恰好生成了 output_len 个 token
        assert r.device_len == r.max_device_len and len(r.input_ids) == r.max_device_len
    print("  每个请求都恰好生成了 output_len 个 token。")
    print()


def section_context(ctx: Context) -> None:
    print("四、Context：只有在 forward_batch 里面才有 ctx.batch")
    batch = Batch(reqs=[make_req(7, [1, 2, 3], 1)], phase="prefill")
    try:
        batch.positions
    except AttributeError as e:
        print(f"  调度器填写之前读 batch.positions：{e}")
    prepare(batch)
    try:
        ctx.batch
    except AssertionError as e:
        print(f"  with 之外读 ctx.batch：{e}")
    with ctx.forward_batch(batch):
        print(f"  with 之内读 ctx.batch：{ctx.batch}")
        try:
            with ctx.forward_batch(batch):
                pass
        except AssertionError as e:
            print(f"  在里面再开一层：{e}")
        assert ctx.batch is batch  # 拒绝嵌套之后，外层的批次还在
    try:
        with ctx.forward_batch(batch):
            raise ValueError("模型前向出错")
    except ValueError:
        pass
    print(f"  with 块里抛出异常之后：{ctx}")
    assert ctx._batch is None  # 出异常之后批次也清掉了
    print()


def section_params_and_utils() -> None:
    print("五、SamplingParams、环境变量与小工具")
    for params in [SamplingParams(), SamplingParams(temperature=0.7, top_p=0.9),
                   SamplingParams(temperature=0.7, top_k=1)]:
        print(f"  {params}  is_greedy={params.is_greedy}")
    try:
        SamplingParams(top_p=0.0)
    except ValueError as e:
        print(f"  SamplingParams(top_p=0.0)：{e}")
    print(f"  div_even(16, 2) = {div_even(16, 2)}（16 个 q 头分给 2 个 rank）")
    print(f"  div_even(8, 16, allow_replicate=True) = {div_even(8, 16, allow_replicate=True)}"
          "（8 个 KV 头、16 个 rank：每个 rank 放 1 个，每个头复制 2 份）")
    try:
        div_even(9, 2)
    except ValueError as e:
        print(f"  div_even(9, 2)：{e}")
    print(f"  div_ceil(151936, 3) = {div_ceil(151936, 3)}"
          "（Qwen3 的 151936 行词表切给 3 个 rank，每个最多这么多行）")
    old = os.environ.get("MINISGL_LOG_LEVEL")
    try:
        os.environ["MINISGL_LOG_LEVEL"] = "debug"
        print(f"  MINISGL_LOG_LEVEL=debug 时 ENV.LOG_LEVEL = {ENV.LOG_LEVEL!r}（现读现解析）")
        os.environ["MINISGL_LOG_LEVEL"] = "loud"  # 故意写错，看报错
        try:
            ENV.LOG_LEVEL
            raise AssertionError("写错的值应该报错")
        except EnvError as e:
            print(f"  MINISGL_LOG_LEVEL=loud：{e}")
    finally:
        if old is None:
            del os.environ["MINISGL_LOG_LEVEL"]
        else:
            os.environ["MINISGL_LOG_LEVEL"] = old

def main() -> None:
    print("第 1 章：核心数据结构\n")
    ctx = Context(page_size=1)
    set_global_ctx(ctx)
    section_requests()
    section_lifetime(ctx)
    section_batches(ctx)
    section_context(ctx)
    section_params_and_utils()


if __name__ == "__main__":
    main()
