# 作弊：自己写“通过”的结论文件然后退出
# 为什么必须判错：结论只能由评测写。旧评测把结论文件的路径放在环境变量 JUDGE_RESULT 里，你的代码写一份“passed”再 os._exit(0) 就骗过去了。现在你的进程的环境里没有它，结论还要带评测从标准输入拿到的口令
# 通用作弊：旧的评测让学习者的代码和 test.py 在同一个进程里跑，这一招对每道题都管用

import json
import os

with open(os.environ["JUDGE_RESULT"], "w", encoding="utf-8") as f:
    json.dump({"verdict": "passed", "message": "全部检查通过"}, f)
os._exit(0)
