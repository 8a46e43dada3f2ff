"""第 8 章的 main：KV 页交给 CacheManager 管。池子很小，接纳按最坏情况预留页；
逐步打印"实际用了几页、预留了几页"，最后和 HF 逐 token 对答案，并在空闲时核对页的账目。"""

from __future__ import annotations

from minisgl.core import SamplingParams
from minisgl.llm import LLM


def pool_trace(llm: LLM, prompts, params) -> tuple[dict[int, list[int]], list[dict]]:
    """像 LLM.generate 一样一步步跑，同时记下每一步之后 KV 池的情况。"""
    uids = list(range(len(prompts)))
    for uid, ids, sp in zip(uids, prompts, params):
        llm.add_req(uid, ids, sp)
    outputs: dict[int, list[int]] = {uid: [] for uid in uids}
    cm, ps, trace = llm.cache_manager, llm.cache_manager.page_size, []
    while llm.runnable:
        for out in llm.step():
            outputs[out.uid].append(out.next_token)
        used = cm.num_pages - cm.allocator.num_free_pages
        trace.append({
            "running": len(llm.decode_manager.running),
            "waiting": len(llm.prefill_manager.pending_list),
            "used": used,  # 真正写了 K/V（或马上要写）的页
            "reserved": used + llm.decode_manager.inflight_pages(ps),  # 加上许诺给在跑请求的页
        })
    return outputs, trace


def main() -> None:
    import torch

    from minibook.hf import encode, hf_greedy
    from minibook.models import default_model, tiny_qwen3

    texts = ["The capital of France is", "Once upon a time,", "def fibonacci(n):",
             "Water boils at a temperature of", "The three primary colors are"]
    max_tokens = [16, 8, 20, 5, 12]
    for path in [default_model(), tiny_qwen3()]:
        # 16 页 × 每页 4 个 token：一个请求最坏要 3～7 页，8 行页表用不满，页先不够
        llm = LLM(path, max_running_req=8, num_page_override=16, page_size=4,
                  max_seq_len_override=64)
        prompts = [torch.tensor(encode(path, t), dtype=torch.int32) for t in texts]
        params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens]
        outputs, trace = pool_trace(llm, prompts, params)
        print(f"== {path.name}（KV 池 {llm.cache_manager.num_pages} 页，页大小 4）")
        if path == default_model():  # 两个模型的页数变化一样（都是 ignore_eos），只打印一次
            print("  步  在跑 排队 已用页 预留页")
            for i, t in enumerate(trace):
                if i < 3 or i % 4 == 0 or i == len(trace) - 1:
                    print(f"  {i:>2} {t['running']:>4} {t['waiting']:>4} {t['used']:>6} {t['reserved']:>6}")
        assert all(t["used"] <= t["reserved"] <= llm.cache_manager.num_pages for t in trace)
        for uid, (text, n) in enumerate(zip(texts, max_tokens)):
            same = outputs[uid] == hf_greedy(path, encode(path, text), n)
            assert same and len(outputs[uid]) == n
        print(f"  5 个请求的输出与 HF 逐 token 一致：True；最多同时在跑 "
              f"{max(t['running'] for t in trace)} 个")
        # 最后一步之后调度器空闲，step() 已经调用过 run_when_idle() 核对账目；这里再核对一次
        llm.run_when_idle()
        print(f"  空闲时核对：空闲 {llm.cache_manager.allocator.num_free_pages} 页 + 前缀缓存 "
              f"{llm.cache_manager.prefix_cache.size_info.total_size // 4} 页 = 总页数 "
              f"{llm.cache_manager.num_pages}，通过")
        llm.shutdown()


if __name__ == "__main__":
    main()
