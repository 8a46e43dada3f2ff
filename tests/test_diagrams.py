"""生成的示意图：提交的 SVG 必须与 tools/diagrams.py 的生成结果一致，并且是合法的 XML。"""

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_committed_diagrams_match_the_generator():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "diagrams.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_svg_asset_is_well_formed():
    svgs = sorted((REPO / "docs" / "assets").glob("*.svg"))
    assert svgs
    for svg in svgs:
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg"), svg.name
