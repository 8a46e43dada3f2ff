"""tests/ 共用的夹具。"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def real_site_dir(tmp_path_factory) -> Path:
    """真仓库的网站，`mkdocs build --strict` 到临时目录，整个会话只构建一次：
    test_site 检查它的页面，test_browser_practice 在浏览器里打开它（同一份构建，不必构建两遍）。"""
    out = tmp_path_factory.mktemp("real") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict 失败：\n{proc.stdout}\n{proc.stderr}"
    return out
