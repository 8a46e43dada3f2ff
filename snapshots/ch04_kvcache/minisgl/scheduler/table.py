"""页表的行与 token 池（token pool）：每个正在运行的请求占一行。

页表 ``page_table``（[max_running_reqs + 1, max_seq_len]，int32）的第 row 行记录一个请求
每个位置的 K/V 槽位；token 池和它同形状，同一个 (row, pos) 存那个位置的 token id。
拼一批输入时，同一对 (行, 位置) 下标从页表取 out_loc、从 token 池取 input_ids；
采样出的 token 直接写回 token 池，不必先拷回 CPU。

行号就是 ``Req.table_idx``：请求开始时 allocate() 一行，结束时 free() 还回来。
页表多出来的最后一行不发给请求。
"""

from __future__ import annotations

import torch


class TableManager:
    """管理页表的行：哪些行空闲，哪些行正被请求占用。"""

    def __init__(self, max_running_reqs: int, page_table: torch.Tensor) -> None:
        # 页表比 max_running_reqs 多一行：最后一行不发给请求
        assert max_running_reqs >= 1 and page_table.shape[0] >= max_running_reqs + 1
        self.max_running_reqs = max_running_reqs
        self.page_table = page_table
        self.token_pool = torch.zeros_like(page_table)  # 同形状、同设备；0 是合法的 token id
        # 空闲行是一个栈：先发出 0、1、2……，还回来的行下一次最先被用到
        self._free_rows: list[int] = list(range(max_running_reqs - 1, -1, -1))
        self._in_use: list[bool] = [False] * max_running_reqs

    @property
    def available_size(self) -> int:
        """还能再接纳几个请求。"""
        return len(self._free_rows)

    def allocate(self) -> int:
        """取一行给新请求，返回行号（即 Req.table_idx）。"""
        assert self._free_rows, "没有空行了：调度器应当先看 available_size"
        row = self._free_rows.pop()
        self._in_use[row] = True
        return row

    def free(self, row: int) -> None:
        """请求结束，把它的行还回来。行里的内容不清除，下一个请求会覆盖。"""
        assert 0 <= row < self.max_running_reqs and self._in_use[row], f"第 {row} 行不在用"
        self._in_use[row] = False
        self._free_rows.append(row)

    def __repr__(self) -> str:
        return (
            f"TableManager(max_running_reqs={self.max_running_reqs}, "
            f"available={self.available_size}, page_table={tuple(self.page_table.shape)})"
        )
