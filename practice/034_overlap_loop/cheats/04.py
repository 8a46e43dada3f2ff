# 作弊：不重叠：先取上一批的结果，再发出这一批
# 为什么必须判错：题目要求每步先拼批、launch，再取上一批的结果（重叠）；它先发出就马上取这一批的结果再拼下一批，根本没有重叠，launch/result 的先后和每一批都和参考不一样。
# 判词里要有：每步先拼批、launch，再取上一批的结果
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def overlap_generate(prompts, max_tokens, engine, num_rows, eos_id=None):
    n = len(prompts)
    if len(max_tokens) != n or any(m < 1 for m in max_tokens) or num_rows < 1:
        raise ValueError("参数不对")
    outputs, running, waiting, row_of, free = [[] for _ in range(n)], [], list(range(n)), {}, set(range(num_rows))
    while waiting or running:
        batch = [(i, row_of[i]) for i in running]
        while waiting and free:
            i = waiting.pop(0)
            row_of[i] = min(free)
            free.remove(row_of[i])
            running.append(i)
            batch.append((i, row_of[i]))
        for (i, _), token in zip(batch, engine.launch(batch).result()):
            outputs[i].append(token)
            if len(outputs[i]) == max_tokens[i] or token == eos_id:
                running.remove(i)
                free.add(row_of.pop(i))
    return outputs
