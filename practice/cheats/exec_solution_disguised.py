# 作弊：顺着 __main__ 的 __file__ 找到 test.py 旁边的参考答案，拼字符串绕过静态检查，执行它
# 为什么必须判错：旧评测让你的代码和 test.py 同在一个进程里，__main__ 就是 test.py，这一招能过。现在你的代码在另一个进程里，那里的 __main__ 是评测的协议，旁边没有参考答案
# 通用作弊：拼出来的名字躲得过静态检查，躲不过进程边界

import sys
from pathlib import Path

_b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
_here = Path(sys.modules["__main__"].__file__).parent
_code = getattr(_here / ("sol" + "ution.py"), "read_" + "text")(encoding="utf-8")
_b["ex" + "ec"](_code, globals())
