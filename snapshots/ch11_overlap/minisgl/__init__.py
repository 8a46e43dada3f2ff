"""minisgl：一步步手写的 SGLang 风格推理引擎。

包本身只做一件事（见下），各部分按需导入，例如 ``from minisgl.core import Req``。
"""

import os
import sys

# torch 的 CPU 算子用 OpenMP 多线程；OpenMP 的线程做完一段活，默认先忙等一阵再睡。机器上别的进程
# 也占着核时，忙等的线程抢走了要干活的线程的核，2 个线程的 decode 反而比 1 个线程慢一半以上。
# PASSIVE：等的时候马上睡，机器空着时不慢，机器忙时不塌。OpenMP 只在 torch 导入时读一次这个变量，
# 所以只在 torch 还没导入时设；用户自己设了的，照用户的。
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
