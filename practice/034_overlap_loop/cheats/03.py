# 作弊：请求一结束就还行，不管在途的那一批
# 为什么必须判错：题目要求结束的请求要等包含它的最后一批做完才还行（规矩 3）；它一结束就还行，不管刚发出的那一批里还有它，新请求拿到这一行时，在途的那一批还在往这一行写。
# 判词里要有：还在往这一行写

"""练习 034 的参考答案。"""

from __future__ import annotations


def overlap_generate(prompts, max_tokens, engine, num_rows, eos_id=None):
    n = len(prompts)
    if len(max_tokens) != n:
        raise ValueError("max_tokens 和 prompts 的长度必须相同")
    if any(m < 1 for m in max_tokens):
        raise ValueError("max_tokens 必须都 ≥ 1")
    if num_rows < 1:
        raise ValueError("num_rows 必须 ≥ 1")
    outputs: list[list[int]] = [[] for _ in range(n)]
    launched = [0] * n
    finished: set[int] = set()
    to_release: list[int] = []  # 已结束、行还没还
    running: list[int] = []
    waiting = list(range(n))
    row_of: dict[int, int] = {}
    free_rows = set(range(num_rows))
    last = None  # 上一步发出的 (batch, handle)
    while True:
        # 1. 拼批：在跑的（还没发满的）在前，再接纳排队的
        batch = [(i, row_of[i]) for i in running if launched[i] < max_tokens[i]]
        while waiting and free_rows:
            i = waiting.pop(0)
            row_of[i] = min(free_rows)
            free_rows.remove(row_of[i])
            running.append(i)
            batch.append((i, row_of[i]))
        # 2. 发出
        current = None
        if batch:
            current = (batch, engine.launch(batch))
            for i, _ in batch:
                launched[i] += 1
        # 3. 处理上一批
        if last is not None:
            last_batch, handle = last
            for (i, _), token in zip(last_batch, handle.result()):
                if i in finished:
                    continue  # 结束之后多算的那一步
                outputs[i].append(token)
                if len(outputs[i]) == max_tokens[i] or token == eos_id:
                    finished.add(i)
                    running.remove(i)
                    to_release.append(i)
        # 4. 还行：不在刚发出的那一批里才还
        in_flight = {i for i, _ in current[0]} if current else set()
        for i in list(to_release):
            to_release.remove(i)
            free_rows.add(row_of.pop(i))
        last = current
        # 5. 结束
        if not waiting and not running and last is None:
            return outputs
