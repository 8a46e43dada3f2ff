"""书的测试（tests/ 与 chapters/*.ipynb）：没 pip install -e . 时也能 import minibook。

nbval 启动的 notebook 内核继承这里的环境变量，所以把 tools/ 也放进 PYTHONPATH。
"""

import os
import sys
from pathlib import Path

TOOLS = str(Path(__file__).resolve().parent / "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
if TOOLS not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)
