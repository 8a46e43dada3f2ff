# 作弊：结束的请求留在批里，直到所有请求都结束
# 为什么必须判错：它绕过了这道题的要点（结束的请求留在批里，直到所有请求都结束），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def generate_batch(prompts, max_tokens, step, eos_id=None, ignore_eos=None):
    n = len(prompts)
    ignore_eos = [False] * n if ignore_eos is None else ignore_eos
    if len(max_tokens) != n or len(ignore_eos) != n or any(not p for p in prompts) or any(m < 1 for m in max_tokens):
        raise ValueError("参数不对")
    outputs, sizes, done = [[] for _ in range(n)], [], [False] * n
    batch = [(i, list(prompts[i]), 0) for i in range(n)]
    while batch:
        tokens = step(batch)
        sizes.append(len(batch))
        for (i, _, _), t in zip(batch, tokens):
            if not done[i]:
                outputs[i].append(t)
                done[i] = len(outputs[i]) == max_tokens[i] or (eos_id is not None and not ignore_eos[i] and t == eos_id)
        if all(done):
            break
        batch = [(i, [outputs[i][-1]], len(prompts[i]) + len(outputs[i]) - 1) for i in range(n)]
    return outputs, sizes
