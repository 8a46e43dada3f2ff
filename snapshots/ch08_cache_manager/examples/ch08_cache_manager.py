"""第 8 章的 main：两个提示相同的请求进了同一个 prefill 批，第二个算完发现缓存里已经有了。

正确的 CacheManager 让它留着自己那份页，直到请求结束；错误的版本把"重复的那份"当场还回
空闲栈，而页表这一行还指着它们。第三个请求分到这些页、写进自己的 K/V，第二个请求的输出
就离开了 HF，空闲时的核对却照样通过。前缀缓存用这里的 PagePrefixCache（按整页记前缀的
字典，本章演示用），第 9 章换成 radix 树。
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MethodType

import torch

from minisgl.core import Req, SamplingParams
from minisgl.kvcache import (BaseCacheHandle, BasePrefixCache, InsertResult, MatchResult,
                             SizeInfo, SUPPORTED_CACHE_MANAGER, pages_to_slots, slots_to_pages)
from minisgl.llm import LLM
from minisgl.scheduler.cache import CacheManager

PAGE_SIZE = 2


@dataclass(frozen=True)
class PageHandle(BaseCacheHandle):
    key: tuple[int, ...]  # 命中的那段 token
    slots: torch.Tensor

    def get_matched_indices(self) -> torch.Tensor:
        return self.slots


@SUPPORTED_CACHE_MANAGER.register("pages")
class PagePrefixCache(BasePrefixCache):
    """最直白的前缀缓存：键是到第 k 页为止的全部 token，值是 [第 k 页的槽位, 锁计数]。"""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.pages: dict[tuple[int, ...], list] = {}

    def _hit(self, ids: list[int]) -> int:
        n, ps = 0, self.page_size
        while n + ps <= len(ids) and tuple(ids[: n + ps]) in self.pages:
            n += ps
        return n

    def _keys(self, ids: tuple[int, ...] | list[int], n: int) -> list[tuple[int, ...]]:
        return [tuple(ids[:k]) for k in range(self.page_size, n + 1, self.page_size)]

    def _handle(self, ids: list[int], n: int) -> PageHandle:
        slots = [self.pages[key][0] for key in self._keys(ids, n)]
        return PageHandle(n, tuple(ids[:n]), torch.cat(slots) if slots else torch.empty(0, dtype=torch.int32))

    def match_prefix(self, input_ids: torch.Tensor) -> MatchResult:
        ids = input_ids.tolist()
        return MatchResult(self._handle(ids, self._hit(ids)))

    def insert_prefix(self, input_ids: torch.Tensor, indices: torch.Tensor) -> InsertResult:
        ids, ps = input_ids.tolist(), self.page_size
        end = len(ids) // ps * ps
        already = self._hit(ids[:end])
        for k in range(already + ps, end + 1, ps):
            self.pages[tuple(ids[:k])] = [indices[k - ps : k].to(torch.int32).clone(), 0]
        return InsertResult(already, self._handle(ids, end))

    def lock_handle(self, handle: BaseCacheHandle, unlock: bool = False) -> None:
        for key in self._keys(handle.key, handle.cached_len):
            self.pages[key][1] += -1 if unlock else 1

    def evict(self, size: int) -> torch.Tensor:
        if size > self.size_info.evictable_size:
            raise RuntimeError(f"逐不出 {size} 个 token")
        out: list[torch.Tensor] = []
        while len(out) * self.page_size < size:  # 每次拿一个没锁、后面没有下一页的前缀
            leaf = next(k for k, (_, locks) in self.pages.items() if locks == 0 and not any(
                len(o) == len(k) + self.page_size and o[: len(k)] == k for o in self.pages))
            out.append(self.pages.pop(leaf)[0])
        return torch.cat(out) if out else torch.empty(0, dtype=torch.int32)

    @property
    def size_info(self) -> SizeInfo:
        locked = sum(1 for _, locks in self.pages.values() if locks > 0)
        return SizeInfo((len(self.pages) - locked) * self.page_size, locked * self.page_size)

    def check_integrity(self) -> None:
        for key in self.pages:
            if len(key) > self.page_size and key[: -self.page_size] not in self.pages:
                raise RuntimeError(f"前缀 {key} 的上一页不在缓存里")


def cache_req_freeing_duplicates(self: CacheManager, req: Req, *, finished: bool) -> None:
    """错误的版本：缓存里已经有的那段，这一行自己的页当场还掉，账上改记缓存的那份。

    账是平的（核对照样通过），可页表这一行没改，注意力读的还是还掉的那几页。
    """
    if finished:
        return CacheManager.cache_req(self, req, finished=True)
    ps, old = self.page_size, req.cache_handle
    pages = self.allocator._rows[req.table_idx]  # 这一行的页（记录本身，不是拷贝）
    slots = torch.tensor(pages_to_slots(pages, ps, 0, req.cached_len), dtype=torch.int32)
    already, new = self.prefix_cache.insert_prefix(req.input_ids[: req.cached_len], slots)
    dup = slice(old.cached_len // ps, already // ps)
    theirs = slots_to_pages(new.get_matched_indices(), ps)[dup]
    self.allocator.hold_pages(theirs + pages[already // ps : new.cached_len // ps])
    self.allocator.free_pages(pages[dup])  # 错：页表这一行还指着它们
    pages[dup] = theirs
    self.unlock(old)
    self.lock(new)
    req.cache_handle = new


def three_requests(path, wrong: bool, max_tokens: int = 10) -> dict:
    """A、A 同批 prefill，C 下一步进来；返回三个输出，以及第二个 A 和 C 各用着哪些页。"""
    from minibook.hf import encode

    a = encode(path, "Water boils at a temperature of")
    c = encode(path, "Once upon a time, in a small village by the sea, there lived")
    # token 预算正好放下两个 A：C 等到下一步，那时第二个 A 的重复页已经（被错误地）还掉了
    llm = LLM(path, max_running_req=4, page_size=PAGE_SIZE, num_page_override=64,
              max_seq_len_override=64, cache_type="pages", max_extend_tokens=2 * len(a))
    cm = llm.cache_manager
    if wrong:
        cm.cache_req = MethodType(cache_req_freeing_duplicates, cm)
    sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    for uid, ids in enumerate([a, a, c]):
        llm.add_req(uid, torch.tensor(ids, dtype=torch.int32), sp)
    outputs: dict[int, list[int]] = {0: [], 1: [], 2: []}
    pages = {}
    while llm.runnable:
        for out in llm.step():
            outputs[out.uid].append(out.next_token)
        running = llm.decode_manager.running
        if not pages and 2 in running:  # C 刚 prefill 完
            row_a2, row_c = running[1].table_idx, running[2].table_idx
            width = len(a) // PAGE_SIZE * PAGE_SIZE  # 第二个 A 整页的提示部分
            pages = {"a2": slots_to_pages(cm.page_table[row_a2, :width], PAGE_SIZE),
                     "c": cm.allocator.row_pages(row_c)}
    llm.run_when_idle()  # 空闲时核对账目（step() 最后一步已经核对过一次）
    llm.shutdown()
    return {"prompts": [a, a, c], "outputs": outputs, "pages": pages}


def main() -> None:
    from minibook.hf import decode, hf_greedy
    from minibook.models import default_model

    path = default_model()
    for wrong, title in [(False, "正确：重复的那份留在行里，直到请求结束"),
                         (True, "错误：重复的那份当场还掉，页表不改")]:
        result = three_requests(path, wrong)
        a2, c = result["pages"]["a2"], result["pages"]["c"]
        print(f"== {title}")
        print(f"  第二个 A 的页表指着 {a2} 号页；C 分到 {c} 号页；重叠 {sorted(set(a2) & set(c))}")
        for uid, name in enumerate(["A", "A", "C"]):
            prompt, out = result["prompts"][uid], result["outputs"][uid]
            same = out == hf_greedy(path, prompt, len(out))
            print(f"  请求 {uid}（{name}）与 HF 一致：{same}  {decode(path, out)!r}")
            assert same or (wrong and uid == 1)
        print("  空闲时核对：通过")


if __name__ == "__main__":
    main()
