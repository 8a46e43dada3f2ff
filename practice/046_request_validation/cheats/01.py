# 作弊：true 当成整数 1（isinstance(True, int)）
# 为什么必须判错：题目要求 true/false 不是数："max_tokens": true 要报错；它的整数检查直接用 isinstance(x, int)，True 被当成整数 1，max_tokens、top_k 是布尔值的坏请求没有被拦住。
# 判词里要有：坏请求没有被拦住｜报错的 param
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _is_int(x):
    return isinstance(x, int)  # True 也是 int
