# 作弊：只查最后一个 max_tokens、max_tokens 是不是短了，num_rows 只认 0
# 为什么必须判错：坏的 max_tokens 可以在任何位置、可以是任何 < 1 的数，长了也不对。固定的坏例子里坏的恰好在末尾、恰好是 0，只查那里的代码以前能过
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = overlap_generate


def overlap_generate(prompts, max_tokens, engine, num_rows, eos_id=None):
    if len(max_tokens) < len(prompts) or num_rows == 0 or (max_tokens and max_tokens[-1] < 1):
        raise ValueError("参数不对")
    fixed = [max(1, m) for m in max_tokens[: len(prompts)]]  # 别的坏值悄悄改好
    return _reference(prompts, fixed, engine, max(1, num_rows), eos_id)
