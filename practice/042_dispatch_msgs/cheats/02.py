# 作弊：什么异常都当成拒绝
# 为什么必须判错：题目要求只有 add_req 抛 ValueError 才记进拒绝列表，别的异常（调度器自己的 bug）原样抛出；它 except Exception 什么都吞，假调度器的 SchedulerBug 被当成拒绝记下了。
# 判词里要有：应该抛出 SchedulerBug

"""练习 042 的参考答案。"""

from __future__ import annotations

from typing import Callable


def dispatch(msgs: list[tuple], add_req: Callable[[int, int], None],
             abort_req: Callable[[int], object]) -> tuple[list[tuple[int, str]], bool]:
    rejects: list[tuple[int, str]] = []

    def one(msg: tuple) -> bool:  # 返回 False：收到了退出
        kind = msg[0]
        if kind == "batch":
            return all(one(m) for m in msg[1])  # all 遇到第一个 False 就停，后面的不处理
        if kind == "exit":
            return False
        if kind == "user":
            try:
                add_req(msg[1], msg[2])
            except Exception as e:  # 只有"这个请求不合法"才拒绝；别的错误原样抛出
                rejects.append((msg[1], str(e)))
        elif kind == "abort":
            abort_req(msg[1])
        else:
            raise TypeError(f"不认识的消息：{kind!r}")
        return True

    running = all(one(m) for m in msgs)
    return rejects, running
