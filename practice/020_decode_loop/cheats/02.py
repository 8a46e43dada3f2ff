# 作弊：结束的请求留在批里，直到所有请求都结束
# 为什么必须判错：题目要求已经结束的请求不再出现在批里；它把结束的请求留到所有请求都结束，还给它送 token、让它多算，测试查每次调用里该不该有这个请求、batch_sizes 时就错了。
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
