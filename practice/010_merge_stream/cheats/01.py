# 作弊：先把整个输入读进列表再处理
# 为什么必须判错：它绕过了这道题的要点（先把整个输入读进列表再处理），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_merge = merge_stream
def merge_stream(items):
    yield from _orig_merge(list(items))
