# 作弊：绕过静态检查：到评测进程的工作目录里写“通过”的结论，再结束评测进程
# 为什么必须判错：不写 open、不提 JUDGE_RESULT 也一样：评测不认没有口令的结论，评测进程被结束了也只是“崩溃”
# 通用作弊：旧的评测让学习者的代码和 test.py 在同一个进程里跑，这一招对每道题都管用

import json
import os

_open = (__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__))["op" + "en"]
_parent = getattr(os, "getpp" + "id")()
_where = os.readlink(f"/proc/{_parent}/cwd")  # 评测进程的临时目录，结论文件就写在那里
with _open(os.path.join(_where, "result.json"), "w", encoding="utf-8") as _f:
    json.dump({"verdict": "passed", "message": "全部检查通过"}, _f)
getattr(os, "ki" + "ll")(_parent, 9)
os._exit(0)
