# 作弊：结束之后多算的 token 也放进输出
# 为什么必须判错：请求结束之后，它还在已经发出的那一批里，那一批算出的 token 不属于它的输出，要丢掉
# 判词里要有：要丢掉
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_reference = overlap_generate


def overlap_generate(prompts, max_tokens, engine, num_rows, eos_id=None):
    seen = {}  # 请求 → 它在每一批里拿到的 token，包括结束之后多算的那一个

    class Recording:
        def launch(self, batch):
            handle = engine.launch(batch)

            class Handle:
                def result(self):
                    tokens = handle.result()
                    for (i, _), token in zip(batch, tokens):
                        seen.setdefault(i, []).append(token)
                    return tokens

            return Handle()

    outputs = _reference(prompts, max_tokens, Recording(), num_rows, eos_id)
    return [seen.get(i, [])[: len(out) + 1] for i, out in enumerate(outputs)]
