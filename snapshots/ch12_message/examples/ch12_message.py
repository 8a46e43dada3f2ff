"""第 12 章的 main：消息在两个进程之间走一个来回。

本进程扮演 tokenizer：bind 自己的收件箱 "tokenizer"，往调度器的收件箱 "backend" 推 UserMsg。
子进程扮演调度器：bind "backend"，把每个请求的 token 逐个作为 DetokenizeMsg 推回来。
最后核对：每个请求收到的 token 恰好是发出去的 input_ids，顺序不乱。

    python examples/ch12_message.py
"""

from __future__ import annotations

import multiprocessing as mp
import shutil

import msgpack
import torch

from minisgl.core import SamplingParams
from minisgl.message import (
    BaseBackendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    DetokenizeMsg,
    ExitMsg,
    UserMsg,
)
from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue, ipc_addr, new_ipc_dir, pack


def fake_scheduler(backend_addr: str, tokenizer_addr: str) -> None:
    """调度器进程的替身：不跑模型，只把收到的 input_ids 一个个"生成"回去。"""
    inbox = ZmqPullQueue(backend_addr, create=True, decoder=BaseBackendMsg.decoder)
    outbox = ZmqPushQueue(tokenizer_addr, create=False, encoder=BaseTokenizerMsg.encoder)
    try:
        while True:
            msg = inbox.get()
            msgs = msg.data if isinstance(msg, BatchBackendMsg) else [msg]
            if isinstance(msg, BatchBackendMsg):
                names = [f"UserMsg(uid={m.uid})" if isinstance(m, UserMsg) else type(m).__name__ for m in msgs]
                print(f"子进程收到一帧 BatchBackendMsg，拆成 {len(msgs)} 条：{', '.join(names)}", flush=True)
            for m in msgs:
                if isinstance(m, ExitMsg):
                    return
                ids = m.input_ids.tolist()
                for i, token in enumerate(ids):
                    outbox.put(DetokenizeMsg(uid=m.uid, next_token=token, finished=i == len(ids) - 1))
    finally:
        inbox.stop()
        outbox.stop()


def same_message(a, b) -> bool:
    """逐字段比较两条消息：张量比较类型和每个元素，其余字段用 ==。"""
    if type(a) is not type(b):
        return False
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        same = (x.dtype == y.dtype and torch.equal(x, y)) if isinstance(x, torch.Tensor) else x == y
        if not same:
            return False
    return True


def show_one_message() -> None:
    msg = UserMsg(uid=0, input_ids=torch.tensor([9906, 11, 1917], dtype=torch.int32),
                  sampling_params=SamplingParams(max_tokens=16))
    encoded = msg.encoder()
    raw = pack(BaseBackendMsg.encoder, msg)
    print("一条 UserMsg 编码成的字典：")
    print("  ", encoded)
    back = BaseBackendMsg.decoder(msgpack.unpackb(raw))
    print(f"msgpack 之后 {len(raw)} 字节；解码回来与原消息逐字段相同（uid、input_ids、采样参数）："
          f"{same_message(back, msg)}")


def main() -> None:
    show_one_message()
    ipc_dir = new_ipc_dir()  # 每次运行一个新目录：同一台机器上同时跑几份也不冲突
    backend, tokenizer = ipc_addr(ipc_dir, "backend"), ipc_addr(ipc_dir, "tokenizer")
    inbox = ZmqPullQueue(tokenizer, create=True, decoder=BaseTokenizerMsg.decoder)
    outbox = ZmqPushQueue(backend, create=False, encoder=BaseBackendMsg.encoder)
    child = mp.get_context("spawn").Process(target=fake_scheduler, args=(backend, tokenizer))
    child.start()
    try:
        prompts = {1: [101, 102, 103], 2: [201], 3: [301, 302, 303, 304, 305]}
        batch = BatchBackendMsg(data=[
            UserMsg(uid=uid, input_ids=torch.tensor(ids, dtype=torch.int32),
                    sampling_params=SamplingParams()) for uid, ids in prompts.items()])
        outbox.put(batch)
        received: dict[int, list[int]] = {uid: [] for uid in prompts}
        finished = set()
        while len(finished) < len(prompts):
            reply = inbox.get(timeout=60_000)
            received[reply.uid].append(reply.next_token)
            if reply.finished:
                finished.add(reply.uid)
        print("\n子进程（调度器替身）在 <临时目录>/backend 上收件，本进程在 <临时目录>/tokenizer 上收件")
        for uid, ids in prompts.items():
            print(f"  请求 {uid}: 发出 {ids} → 收回 {received[uid]}")
        assert received == prompts, "收回的 token 与发出的不同"
        print("全部对上：每个请求收回的 token 与发出的相同，顺序也相同")
        outbox.put(ExitMsg())
        child.join(timeout=30)
        assert child.exitcode == 0, f"子进程退出码 {child.exitcode}"
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        inbox.stop()
        outbox.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
