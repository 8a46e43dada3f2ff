"""参考注意力后端：按页表取回 K/V，交给 torch 的 scaled_dot_product_attention（SDPA）。

它追求"一眼看得出是对的"，不追求快。三件事要做对：

1. 变长批次：一批里各请求的 query 数、key 数都不同。prefill 逐个请求算；decode 时每个
   请求只有 1 个 query，补齐成一个矩形批次一次算完，补出来的 key 用 key_mask 遮掉。
2. 因果掩码要右下对齐：请求有 n_k 个 key、这一步有 n_q 个 query 时，第 i 个 query 的位置是
   n_k - n_q + i，它能看见位置 ≤ 它的全部 key。``is_causal=True`` 是左上对齐的
   （第 i 个 query 只看前 i+1 个 key），只在 n_q == n_k 时才对；有缓存前缀时就错了。
3. GQA：hq 个 q 头共用 hkv 个 KV 头，第 j 个 q 头用第 j // (hq / hkv) 个 KV 头。
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from minisgl.kvcache import BaseKVCachePool
from minisgl.utils import to_device

from .base import BaseAttnBackend, BaseAttnMetadata

if TYPE_CHECKING:
    from minisgl.core import Batch


def causal_mask_bottom_right(
    num_q: int, num_k: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """[num_q, num_k] 的布尔掩码，True 表示能看见。

    query 是序列的最后 num_q 个 token：第 i 个 query 的位置是 num_k - num_q + i，
    它能看见位置 0..num_k - num_q + i 的 key。num_q == num_k 时就是普通的下三角。
    """
    assert 0 <= num_q <= num_k, (num_q, num_k)
    q_pos = torch.arange(num_k - num_q, num_k, device=device)
    k_pos = torch.arange(num_k, device=device)
    return k_pos[None, :] <= q_pos[:, None]


@dataclass
class SDPAAttnMetadata(BaseAttnMetadata):
    """一个批次的注意力元数据，按 batch.padded_reqs 的顺序，每个请求一项。"""

    seq_lens_q: list[int]  # 这一步每个请求的 query 数（extend_len）
    seq_lens_k: list[int]  # 每个请求的 key 数（device_len）：缓存的前缀 + 这一步的 token
    kv_indices: torch.Tensor  # [B, max_k] 每个 key 在 KV 池里的槽位，从页表里取出
    key_mask: torch.Tensor  # [B, max_k] bool，True 是真实的 key，False 是补齐的
    single_query: bool  # 每个请求都只有 1 个 query（decode）：整批一次算完
    causal_masks: list[torch.Tensor]  # 每个请求的右下对齐掩码 [n_q, n_k]；decode 不需要，为空

    @property
    def num_tokens(self) -> int:
        return sum(self.seq_lens_q)


def repeat_kv_heads(x: torch.Tensor, num_q_heads: int) -> torch.Tensor:
    """GQA：把 [B, hkv, n, d] 的每个 KV 头重复 hq / hkv 次，得到 [B, hq, n, d]。

    repeat_interleave 让相邻的 q 头共用一个 KV 头：q 头 j 对应 KV 头 j // (hq / hkv)，
    与 Hugging Face 的 repeat_kv 相同，也与 TP 按头切分的方式一致。
    _sdpa 用 SDPA 的 enable_gqa=True 做同样的对应，但不把 K/V 真的复制出来；
    这个函数留作它的定义和测试里的参照。
    """
    num_kv_heads = x.shape[1]
    assert num_q_heads % num_kv_heads == 0, (num_q_heads, num_kv_heads)
    group = num_q_heads // num_kv_heads
    return x if group == 1 else x.repeat_interleave(group, dim=1)


class SDPAAttnBackend(BaseAttnBackend):
    """在 CPU 和 GPU 上都能跑的参考后端。"""

    def __init__(self, kvcache: BaseKVCachePool, page_table: torch.Tensor) -> None:
        self.kvcache = kvcache
        self.page_table = page_table

    def prepare_metadata(self, batch: Batch) -> None:
        reqs = batch.padded_reqs
        device = self.page_table.device
        seq_lens_q = [req.extend_len for req in reqs]
        seq_lens_k = [req.device_len for req in reqs]

        # 从页表一次取出所有请求 key 的槽位，补齐成 [B, max_k]。补出来的位置重复这个请求
        # 最后一个 key 的槽位：那里一定写过（这一步刚存进去），读到的不会是未初始化的 nan，
        # 再由 key_mask 遮掉。补成任意槽位都不行：nan 乘以 0 还是 nan。
        lens_k = to_device(seq_lens_k, torch.int64, device)
        rows = to_device([req.table_idx for req in reqs], torch.int64, device)
        pos = torch.arange(max(seq_lens_k), device=device)
        key_mask = pos[None, :] < lens_k[:, None]
        clamped = torch.minimum(pos[None, :], lens_k[:, None] - 1)
        kv_indices = self.page_table[rows[:, None], clamped]
        single_query = all(n == 1 for n in seq_lens_q)
        # 掩码只取决于长度，所有层都一样：在这里做一次，而不是每层每个请求再做一遍。
        # decode（每个请求 1 个 query）不需要因果掩码：那个 query 本来就该看见全部 key
        causal_masks = [] if single_query else [
            causal_mask_bottom_right(nq, nk, device=device)
            for nq, nk in zip(seq_lens_q, seq_lens_k)]

        batch.attn_metadata = SDPAAttnMetadata(
            seq_lens_q=seq_lens_q,
            seq_lens_k=seq_lens_k,
            kv_indices=kv_indices,
            key_mask=key_mask,
            single_query=single_query,
            causal_masks=causal_masks,
        )

    def init_capture_graph(self, max_bs: int, max_seq_len: int) -> None:
        # 录下的图里形状不能变：每个请求都按页表宽度 max_seq_len 个 key 算，多出来的由 key_mask 遮掉。
        # 所以这个后端走图时，每步的注意力按最长可能的序列算（paged 后端没有这个浪费）
        device = self.page_table.device
        self._capture_indices = self.page_table[-1:, :1].expand(max_bs, max_seq_len).clone()
        self._capture_mask = torch.zeros((max_bs, max_seq_len), dtype=torch.bool, device=device)
        self._capture_mask[:, 0] = True  # 占位请求：1 个 key，在占位页上

    def prepare_for_capture(self, batch: Batch) -> None:
        bs = batch.padded_size
        batch.attn_metadata = SDPAAttnMetadata(
            seq_lens_q=[1] * bs,  # decode 走图：每个请求 1 个 query，永远如此
            seq_lens_k=[],  # 每步都不同：录进图的代码不能读 Python 列表，只读 key_mask
            kv_indices=self._capture_indices[:bs], key_mask=self._capture_mask[:bs],
            single_query=True, causal_masks=[])

    def prepare_for_replay(self, static: Batch, batch: Batch) -> None:
        src: SDPAAttnMetadata = batch.attn_metadata
        dst: SDPAAttnMetadata = static.attn_metadata
        width = src.kv_indices.shape[1]
        dst.kv_indices[:, :width].copy_(src.kv_indices)
        # 多出的列重复每个请求最后一个 key 的槽位（写过的、有限的数），再由 key_mask 遮掉
        dst.kv_indices[:, width:].copy_(src.kv_indices[:, -1:].expand(-1, dst.kv_indices.shape[1] - width))
        dst.key_mask[:, :width].copy_(src.key_mask)
        dst.key_mask[:, width:].fill_(False)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        meta: SDPAAttnMetadata = batch.attn_metadata
        assert q.shape[0] == meta.num_tokens, "prepare_metadata 之后批次又变了？"
        # 先存后算：这一步的 token 也是自己（和后面 token）的 key
        self.kvcache.store_kv(k, v, batch.out_loc, layer_id)
        k_cache, v_cache = self.kvcache.k_cache(layer_id), self.kvcache.v_cache(layer_id)
        if meta.single_query:
            return self._forward_single_query(q, k_cache, v_cache, meta)
        return self._forward_per_request(q, k_cache, v_cache, meta)

    def _forward_per_request(self, q, k_cache, v_cache, meta: SDPAAttnMetadata) -> torch.Tensor:
        """prefill：各请求长度不同，逐个请求算，结果按原顺序拼回去。"""
        outputs = []
        start = 0
        for i, (num_q, num_k) in enumerate(zip(meta.seq_lens_q, meta.seq_lens_k)):
            slots = meta.kv_indices[i, :num_k]
            # [n, heads, d] → [1, heads, n, d]：SDPA 要的是 (batch, heads, 序列, d)
            qi = q[start: start + num_q].transpose(0, 1)[None]
            ki = k_cache.index_select(0, slots).transpose(0, 1)[None]
            vi = v_cache.index_select(0, slots).transpose(0, 1)[None]
            out = self._sdpa(qi, ki, vi, meta.causal_masks[i])  # [1, hq, num_q, d]
            outputs.append(out[0].transpose(0, 1))
            start += num_q
        return torch.cat(outputs)

    def _forward_single_query(self, q, k_cache, v_cache, meta: SDPAAttnMetadata) -> torch.Tensor:
        """decode：每个请求 1 个 query，它是序列的最后一个 token，能看见全部真实的 key。

        所以不需要因果掩码，只需要遮掉补齐的 key。整批一次 SDPA。
        """
        qb = q[:, :, None, :]  # [B, hq, 1, d]
        # index_select 按一维下标取行，比拿 int32 张量做高级索引快得多（CPU 上差几倍）
        batch_size, max_k = meta.kv_indices.shape
        flat = meta.kv_indices.flatten()
        kb = k_cache.index_select(0, flat).view(batch_size, max_k, *k_cache.shape[1:])
        vb = v_cache.index_select(0, flat).view(batch_size, max_k, *v_cache.shape[1:])
        kb, vb = kb.transpose(1, 2), vb.transpose(1, 2)  # [B, max_k, hkv, d] → [B, hkv, max_k, d]
        mask = meta.key_mask[:, None, None, :]  # [B, 1, 1, max_k]，对所有头、那 1 个 query 广播
        return self._sdpa(qb, kb, vb, mask)[:, :, 0, :]

    @staticmethod
    def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor):
        """q: [B, hq, n_q, d]，k/v: [B, hkv, n_k, d]，mask 可广播到 [B, hq, n_q, n_k]。

        enable_gqa=True：q 头 j 用 KV 头 j // (hq / hkv)，和 repeat_kv_heads 的对应一样，
        但不先把 K/V 复制 hq / hkv 份——decode 时那份复制比注意力本身还贵。
        """
        assert q.shape[1] % k.shape[1] == 0, (q.shape, k.shape)
        scale = q.shape[-1] ** -0.5  # 写明缩放，不依赖默认值
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
