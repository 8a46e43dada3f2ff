# 作弊：执行 test.py 旁边的 solution.py
# 为什么必须判错：参考答案不是你的代码；旧评测里 __main__ 就是 test.py，顺着它的 __file__ 就找到了 solution.py。现在你的代码在另一个进程里，__main__ 不是 test.py，评测也先拒绝读文件、exec 和提到 solution 的代码
# 通用作弊：旧的评测让学习者的代码和 test.py 在同一个进程里跑，这一招对每道题都管用

import sys
from pathlib import Path

exec((Path(sys.modules["__main__"].__file__).parent / "solution.py").read_text(encoding="utf-8"))
