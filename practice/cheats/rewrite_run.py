# 作弊：把 test.py 的 run 换成什么都不查的函数
# 为什么必须判错：旧评测在导入你的文件之后才调用 run(mod)：导入时把 run 的代码换掉，检查就一条都不跑了。现在 test.py 在评测进程里，你的进程里根本没有它的 run
# 通用作弊：旧的评测让学习者的代码和 test.py 在同一个进程里跑，这一招对每道题都管用

import sys

sys.modules["__main__"].run.__code__ = (lambda mod: None).__code__
