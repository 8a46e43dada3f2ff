# 作弊：每一步把整段序列重算一遍
# 为什么必须判错：题目要求 prompt 只用 step(prompt, 0) 送一次，之后每步只送上一步选出的 1 个 token、start 是它的位置；它每步都从 0 把整段序列重送，第 2 次调用起参数就和假模型记的缓存对不上。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def greedy_generate(prompt, step, max_new_tokens, eos_id=None):
    seq, new_ids = list(prompt), []
    while True:
        next_id = argmax(step(list(seq), 0))
        new_ids.append(next_id)
        seq.append(next_id)
        if len(new_ids) == max_new_tokens or next_id == eos_id:
            return new_ids
