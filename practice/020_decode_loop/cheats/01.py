# 作弊：一个请求一个请求地生成（批大小总是 1）
# 为什么必须判错：题目要求第一次调用就是所有请求一起 prefill、之后每次调用包含所有还没结束的请求；它一个请求一个请求地跑完，批大小总是 1，第一次调用里就少了别的请求。
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
