# 作弊：每一步把整段序列重算一遍
# 为什么必须判错：它绕过了这道题的要点（每一步把整段序列重算一遍），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def greedy_generate(prompt, step, max_new_tokens, eos_id=None):
    seq, new_ids = list(prompt), []
    while True:
        next_id = argmax(step(list(seq), 0))
        new_ids.append(next_id)
        seq.append(next_id)
        if len(new_ids) == max_new_tokens or next_id == eos_id:
            return new_ids
