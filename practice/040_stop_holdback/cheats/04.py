# 作弊：finish 不放出扣住的文字
# 为什么必须判错：题目要求流结束时 finish() 放出还扣着的文字（没命中的话）；它总是返回空串，末尾被扣住、最后也没成为停止串的那几个字符丢了。
# 判词里要有：finish()
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

StopFilter.finish = lambda self: ""
