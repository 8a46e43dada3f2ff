# 作弊：只查最后一个请求（它的 max_tokens、它的 uid 有没有重复），max_running 只认 0
# 为什么必须判错：坏的请求可以在列表的任何位置、坏值可以是任何 < 1 的数：题面要求每个请求都查。固定的几个坏例子里坏的恰好都在末尾、恰好是 0，只查那里的代码以前能过
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = simulate


def simulate(requests, max_running, continuous):
    if max_running == 0:
        raise ValueError("max_running 是 0")
    if requests:
        uid, max_tokens = requests[-1]
        if max_tokens < 1 or any(u == uid for u, _ in requests[:-1]):
            raise ValueError("最后一个请求不对")
    seen, clean = set(), []
    for uid, max_tokens in requests:  # 别处的坏参数悄悄改好
        if uid not in seen:
            seen.add(uid)
            clean.append((uid, max(1, max_tokens)))
    return _reference(clean, max(1, max_running), continuous)
