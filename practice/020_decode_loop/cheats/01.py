# 作弊：一个请求一个请求地生成（批大小总是 1）
# 为什么必须判错：它绕过了这道题的要点（一个请求一个请求地生成（批大小总是 1）），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def generate_batch(prompts, max_tokens, step, eos_id=None, ignore_eos=None):
    n = len(prompts)
    ignore_eos = [False] * n if ignore_eos is None else ignore_eos
    if len(max_tokens) != n or len(ignore_eos) != n or any(not p for p in prompts) or any(m < 1 for m in max_tokens):
        raise ValueError("参数不对")
    outputs, sizes = [[] for _ in range(n)], []
    for i in range(n):
        batch = [(i, list(prompts[i]), 0)]
        while True:
            token = step(batch)[0]
            sizes.append(1)
            outputs[i].append(token)
            if len(outputs[i]) == max_tokens[i] or (eos_id is not None and not ignore_eos[i] and token == eos_id):
                break
            batch = [(i, [token], len(prompts[i]) + len(outputs[i]) - 1)]
    return outputs, sizes
