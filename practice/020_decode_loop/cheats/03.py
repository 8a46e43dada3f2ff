# 作弊：只查最后一个提示词和最后一个 max_tokens（旧测试的坏元素都放在末尾）
# 为什么必须判错：空的提示词不管排在第几个，prefill 都没有 token 可送，step 拿不到它的 logits；max_tokens < 1 的请求不管在哪都会被多生成一个 token。只看末尾，前面的坏请求就混进了批里
# 判词里要有：是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_generate_batch = generate_batch


def generate_batch(prompts, max_tokens, step, eos_id=None, ignore_eos=None):
    n = len(prompts)
    flags = [False] * n if ignore_eos is None else ignore_eos
    if len(max_tokens) != n or len(flags) != n:
        raise ValueError("长度对不上")
    if n and (not prompts[-1] or max_tokens[-1] < 1):
        raise ValueError("最后一个请求不对")
    outputs, sizes = [[] for _ in range(n)], []
    running = list(range(n))
    batch = [(i, list(prompts[i]), 0) for i in running]
    while running:
        tokens = step(batch)
        sizes.append(len(batch))
        for (i, _, _), t in zip(batch, tokens):
            outputs[i].append(t)
        running = [i for i in running if not (len(outputs[i]) >= max_tokens[i] or (
            eos_id is not None and not flags[i] and outputs[i][-1] == eos_id))]
        batch = [(i, [outputs[i][-1]], len(prompts[i]) + len(outputs[i]) - 1) for i in running]
    return outputs, sizes
