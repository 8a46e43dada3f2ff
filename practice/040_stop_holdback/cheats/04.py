# 作弊：finish 不放出扣住的文字
# 为什么必须判错：它绕过了这道题的要点（finish 不放出扣住的文字），只在测试没查到的地方才“对”。
# 判词里要有：finish()
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

StopFilter.finish = lambda self: ""
