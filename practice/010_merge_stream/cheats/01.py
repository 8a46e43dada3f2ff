# 作弊：先把整个输入读进列表再处理
# 为什么必须判错：题目要求流式地尽早交出：普通权重读到就交、一组凑齐马上交；它先把整个迭代器读进列表再处理，第一项要等全部读完才出来，测试检查交出时机时就错了，整个模型也攒在内存里。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_merge = merge_stream
def merge_stream(items):
    yield from _orig_merge(list(items))
