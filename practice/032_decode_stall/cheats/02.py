# 作弊：token 按一步开始的时刻到达
# 为什么必须判错：题目要求 token 在它那一步结束时到达；它按一步开始的时刻记 token 到达，最大间隔少算了 decode 自己的用时，和参考的 max_gap 对不上。
# 判词里要有：结束时到达
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def simulate(decode_left, prompt_len, token_budget, decode_between_chunks, prefill_ms, decode_ms):
    if prompt_len < 1 or token_budget < 1 or any(n < 1 for n in decode_left):
        raise ValueError("参数不对")
    left, last = list(decode_left), [0.0] * len(decode_left)
    now, pos, max_gap, ttft, steps = 0.0, 0, 0.0, 0.0, []
    while pos < prompt_len or any(left):
        running = [i for i, n in enumerate(left) if n > 0]
        if pos < prompt_len and not (decode_between_chunks and running and steps and steps[-1][0] == "prefill"):
            end = min(pos + token_budget, prompt_len)
            now += prefill_ms(pos, end)
            steps.append(("prefill", pos, end))
            pos = end
            if pos == prompt_len:
                ttft = now
        else:
            start = now
            now += decode_ms(len(running))
            steps.append(("decode", len(running)))
            for i in running:
                max_gap = max(max_gap, start - last[i])   # 按这一步开始的时刻算
                last[i] = start
                left[i] -= 1
    return steps, max_gap, ttft
