"""第 12 章的演示：对象过不了进程边界，过去的只有字节。

- ZMQ 套接字和 msgpack 都不收一个 UserMsg 对象；
- multiprocessing 看上去能把对象交给子进程，其实是替你 pickle 成字节，子进程照着字节另造一个：
  子进程改它的普通字段，父进程看不见；torch 张量例外，torch 给 multiprocessing 注册了自己的
  办法，把张量挪进共享内存、只传一个句柄，所以子进程改张量，父进程看得见。

    python examples/ch12_boundary.py
"""

from __future__ import annotations

import multiprocessing as mp

import msgpack
import torch
import zmq

from minisgl.core import SamplingParams
from minisgl.message import UserMsg


def sample_msg() -> UserMsg:
    return UserMsg(uid=7, input_ids=torch.tensor([9906, 11, 1917], dtype=torch.int32),
                   sampling_params=SamplingParams(temperature=0.7, max_tokens=64))


def refusals(msg: UserMsg) -> dict[str, str]:
    """把对象直接交给 ZMQ 套接字和 msgpack：两者各自报什么错。"""
    out = {}
    context = zmq.Context()
    socket = context.socket(zmq.PUSH)
    socket.bind("inproc://boundary")  # 进程内的地址就够了：send 在交给对端之前就拒绝
    try:
        socket.send(msg)
        out["socket.send"] = "发出去了"
    except TypeError as error:
        out["socket.send"] = f"TypeError: {error}"
    finally:
        socket.close()
        context.term()
    try:
        msgpack.packb(msg)
        out["msgpack.packb"] = "编码成功"
    except TypeError as error:
        out["msgpack.packb"] = f"TypeError: {error}"
    return out


def _child(inbox, outbox) -> None:
    msg = inbox.get()  # 照着收到的字节新造的一个 UserMsg
    msg.uid, msg.sampling_params.max_tokens = 0, 1
    msg.input_ids[0] = 0
    outbox.put(None)


def through_multiprocessing(msg: UserMsg) -> UserMsg:
    """把 msg 经 multiprocessing.Queue 交给一个 spawn 出来的子进程，子进程改掉它的三处；返回父进程里的 msg。"""
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_child, args=(inbox, outbox))
    child.start()
    try:
        inbox.put(msg)
        outbox.get(timeout=120)  # 子进程改完了
        child.join(timeout=30)
        assert child.exitcode == 0, f"子进程退出码 {child.exitcode}"
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    return msg


def main() -> None:
    msg = sample_msg()
    for what, result in refusals(msg).items():
        print(f"{what}(UserMsg)：{result}")
    print("经 multiprocessing.Queue 交给子进程；子进程把 uid 改成 0、max_tokens 改成 1、input_ids[0] 改成 0")
    msg = through_multiprocessing(msg)
    print(f"父进程里的同一个对象：uid={msg.uid}，max_tokens={msg.sampling_params.max_tokens}，"
          f"input_ids={msg.input_ids.tolist()}（张量在共享内存里：{msg.input_ids.is_shared()}）")


if __name__ == "__main__":
    main()
