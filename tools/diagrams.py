"""书里的示意图：用几行 Python 生成干净的 SVG（不依赖任何绘图库）。

图是手工排版的：坐标写死在这里，改图就改这里再重新生成（python tools/diagrams.py -h 查看用法）。
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parent))  # 不安装也能用：minibook 就在 tools/ 里
from minibook import cli  # noqa: E402

PROG = "python tools/diagrams.py"

ASSETS = Path(__file__).resolve().parent.parent / "docs" / "assets"

FONT = "'Noto Sans CJK SC', 'Source Han Sans SC', 'PingFang SC', 'Microsoft YaHei', 'WenQuanYi Micro Hei', sans-serif"
MONO = "'JetBrains Mono', 'DejaVu Sans Mono', Menlo, Consolas, monospace"

# 配色：服务进程（蓝）、调度进程（绿）、ZMQ 消息（橙）、集合通信（紫）
BLUE = ("#eaf2fb", "#3b73b9")
GREEN = ("#edf7ef", "#3a8a4a")
ENGINE = ("#ffffff", "#6fa77a")
CHIP = ("#f7f7f7", "#b9b9b9")
GRAY = ("#f4f4f4", "#9a9a9a")
ZMQ = "#d9822b"
NCCL = "#8e44ad"
HTTP = "#555555"
INK = "#222222"
MUTED = "#666666"


class Svg:
    """一个极小的 SVG 拼接器：矩形、文字、箭头。"""

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.parts: list[str] = []

    def rect(self, x, y, w, h, colors, *, rx=8, dash=False, stroke_width=1.5):
        fill, stroke = colors
        dash_attr = ' stroke-dasharray="6 4"' if dash else ""
        self.parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{stroke_width}"{dash_attr}/>'
        )

    def text(self, x, y, s, *, size=14, color=INK, bold=False, anchor="middle", mono=False):
        weight = ' font-weight="bold"' if bold else ""
        family = MONO if mono else FONT
        self.parts.append(
            f'<text x="{x}" y="{y}" font-family="{family}" font-size="{size}" fill="{color}" '
            f'text-anchor="{anchor}"{weight}>{escape(s)}</text>'
        )

    def rich(self, x, y, spans, *, size=13, anchor="start"):
        """一行里混排普通字与等宽字：spans = [(文字, 是否等宽, 颜色), ...]。"""
        inner = "".join(
            f'<tspan font-family="{MONO if mono else FONT}" fill="{color}">{escape(s)}</tspan>'
            for s, mono, color in spans
        )
        self.parts.append(f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}">{inner}</text>')

    def arrow(self, x1, y1, x2, y2, color, *, both=False, dash=False, width=2):
        marker = f"url(#head-{color[1:]})"
        start = f' marker-start="{marker}"' if both else ""
        dash_attr = ' stroke-dasharray="7 5"' if dash else ""
        self.parts.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" stroke-width="{width}"'
            f'{dash_attr} marker-end="{marker}"{start}/>'
        )

    def line(self, x1, y1, x2, y2, color, *, dash=False, width=2):
        dash_attr = ' stroke-dasharray="7 5"' if dash else ""
        self.parts.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" stroke-width="{width}"{dash_attr}/>'
        )

    def render(self, colors_with_heads: list[str]) -> str:
        markers = "".join(
            f'<marker id="head-{c[1:]}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
            for c in colors_with_heads
        )
        body = "\n  ".join(self.parts)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" aria-label="mini-sglang 架构全景">\n'
            f"  <defs>{markers}</defs>\n"
            f'  <rect width="100%" height="100%" fill="#ffffff"/>\n  {body}\n</svg>\n'
        )


def process_box(svg: Svg, x, y, w, h, colors, title, package, chapter, note):
    svg.rect(x, y, w, h, colors)
    svg.text(x + w / 2, y + 24, title, size=16, bold=True)
    svg.rich(x + w / 2, y + 45, [(package, True, colors[1]), (f" · {chapter}", False, MUTED)], anchor="middle")
    if note:
        svg.text(x + w / 2, y + 64, note, size=13, color=MUTED)


def chip(svg: Svg, x, y, w, h, package, chapter):
    svg.rect(x, y, w, h, CHIP, rx=6, stroke_width=1)
    svg.text(x + w / 2, y + 18, package, size=13, mono=True)
    svg.text(x + w / 2, y + 35, chapter, size=12, color=MUTED)


def package_row(svg: Svg, y, items):
    """一行若干个“包名 + 说明”，每项从给定的 x 开始（SVG 会合并空格，所以不用空格对齐）。"""
    for x, package, note in items:
        svg.rich(x, y, [(package, True, INK), (" " + note, False, MUTED)])


def label(svg: Svg, x, y, s, color, *, anchor="middle", size=13):
    """箭头旁的说明文字，带白底，压在线上也看得清。"""
    width = sum(size if ord(ch) > 127 else size * 0.6 for ch in s) + 8
    left = {"middle": x - width / 2, "start": x - 4, "end": x - width + 4}[anchor]
    svg.parts.append(
        f'<rect x="{left:.1f}" y="{y - size}" width="{width:.1f}" height="{size + 6}" fill="#ffffff" opacity="0.92"/>'
    )
    svg.text(x, y, s, size=size, color=color, anchor=anchor)


def scheduler_box(svg: Svg, x, y, w, h, rank: str, detailed: bool):
    svg.rect(x, y, w, h, GREEN)
    svg.text(x + w / 2, y + 24, f"Scheduler 进程 · rank {rank}", size=16, bold=True)
    if detailed:
        svg.rich(
            x + w / 2,
            y + 45,
            [("minisgl.scheduler", True, GREEN[1]), (" · 第 7–11、14 章", False, MUTED)],
            anchor="middle",
        )
        svg.text(x + w / 2, y + 64, "组批 · 缓存管理 · 分块 prefill · 重叠调度", size=13, color=MUTED)
        ex, ey, ew, eh = x + 14, y + 78, w - 28, h - 92
        svg.rect(ex, ey, ew, eh, ENGINE, rx=6)
        svg.rich(
            ex + ew / 2,
            ey + 22,
            [("Engine", False, INK), ("  minisgl.engine", True, GREEN[1]), (" · 第 6、18 章", False, MUTED)],
            anchor="middle",
            size=14,
        )
        cw, ch, gap = (ew - 30) / 2, 40, 8
        cells = [("models", "第 3 章"), ("layers", "第 2 章"), ("attention", "第 5、17 章"), ("kvcache", "第 4、9 章")]
        for i, (pkg, chap) in enumerate(cells):
            cx = ex + 10 + (i % 2) * (cw + 10)
            cy = ey + 34 + (i // 2) * (ch + gap)
            chip(svg, cx, cy, cw, ch, pkg, chap)
    else:
        svg.text(x + w / 2, y + 45, "同一份调度代码", size=13, color=MUTED)
        ex, ey, ew, eh = x + 14, y + 78, w - 28, h - 92
        svg.rect(ex, ey, ew, eh, ENGINE, rx=6)
        svg.text(ex + ew / 2, ey + 24, "Engine", size=14)
        svg.text(ex + ew / 2, ey + 50, "同样的模型结构，", size=13, color=MUTED)
        svg.text(ex + ew / 2, ey + 70, "只持有 1/N 的权重与 KV 头", size=13, color=MUTED)


def ch00_architecture() -> str:
    svg = Svg(960, 800)
    svg.text(480, 34, "mini-sglang 全景：一条请求经过的进程，和实现它们的包", size=21, bold=True)
    svg.text(
        480, 58, "方框是进程；箭头是进程之间的消息；灰字是代码所在的包，以及书里动手实现它的章节", size=13, color=MUTED
    )

    # 第一行：客户端 ⇄ API Server
    svg.rect(40, 90, 200, 62, GRAY)
    svg.text(140, 116, "HTTP 客户端", size=16, bold=True)
    svg.text(140, 138, "curl · OpenAI SDK", size=13, color=MUTED)
    process_box(
        svg, 330, 82, 300, 78, BLUE, "API Server 进程", "minisgl.server", "第 15 章", "启动其余进程；HTTP ⇄ 内部消息"
    )
    svg.arrow(242, 121, 326, 121, HTTP, both=True)
    label(svg, 285, 110, "HTTP", HTTP)

    # 第二行：Tokenizer / Detokenizer
    process_box(svg, 90, 214, 300, 78, BLUE, "Tokenizer 进程", "minisgl.tokenizer", "第 13 章", "文本 → token id")
    process_box(
        svg, 570, 214, 300, 78, BLUE, "Detokenizer 进程", "minisgl.tokenizer", "第 13 章", "token id → 增量文本"
    )
    svg.arrow(400, 160, 300, 212, ZMQ)
    label(svg, 352, 184, "请求文本", ZMQ, anchor="end")
    svg.arrow(660, 212, 560, 162, ZMQ)
    label(svg, 612, 184, "生成的文本", ZMQ, anchor="start")

    # 第三行：每个 TP rank 一个 Scheduler 进程，各自带一个 Engine
    top, height = 360, 250
    scheduler_box(svg, 30, top, 330, height, "0", detailed=True)
    scheduler_box(svg, 410, top, 220, height, "1", detailed=False)
    scheduler_box(svg, 700, top, 230, height, "N-1", detailed=False)
    svg.text(665, top + 130, "…", size=22, color=MUTED)

    svg.arrow(220, 294, 190, 358, ZMQ)
    label(svg, 200, 330, "token id", ZMQ, anchor="end")
    svg.arrow(330, 358, 640, 294, ZMQ)
    label(svg, 470, 320, "新 token", ZMQ)

    # rank 0 把收到的请求广播给其他 rank（ZMQ）
    svg.arrow(362, top + 40, 408, top + 40, ZMQ)
    svg.arrow(632, top + 40, 698, top + 40, ZMQ)
    svg.text(385, top + 32, "广播", size=12, color=ZMQ)
    svg.text(665, top + 32, "广播", size=12, color=ZMQ)
    # 各 rank 的 Engine 之间：集合通信
    y_cc = top + 170
    svg.line(346, y_cc, 424, y_cc, NCCL, dash=True, width=2.5)
    svg.line(616, y_cc, 714, y_cc, NCCL, dash=True, width=2.5)

    # 图例：两种 rank 间的连线
    ly = top + height + 34
    svg.line(40, ly - 5, 84, ly - 5, ZMQ, width=2)
    svg.parts.append(f'<path d="M84,{ly - 10} L94,{ly - 5} L84,{ly} z" fill="{ZMQ}"/>')
    svg.rich(
        104,
        ly,
        [
            ("ZMQ 消息：", False, ZMQ),
            ("rank 0 收请求并广播给其他 rank；消息类型与序列化在 ", False, INK),
            ("minisgl.message", True, ZMQ),
            ("（第 12 章），收发与多 rank 同步在第 14 章", False, INK),
        ],
    )
    svg.line(40, ly + 25, 94, ly + 25, NCCL, dash=True, width=2.5)
    svg.rich(
        104,
        ly + 30,
        [
            ("集合通信：", False, NCCL),
            ("张量并行的 all-reduce / all-gather，GPU 上走 NCCL、CPU 上走 gloo；", False, INK),
            ("minisgl.distributed", True, NCCL),
            ("（第 16 章）", False, INK),
        ],
    )

    # 底部：所有进程共用的包
    by = ly + 56
    svg.rect(30, by, 900, 92, GRAY)
    svg.text(48, by + 26, "所有进程共用", size=15, bold=True, anchor="start")
    package_row(
        svg,
        by + 26,
        [
            (160, "minisgl.core", "Req · Batch · Context（第 1 章）"),
            (520, "minisgl.utils", "日志、ZMQ 封装等工具（第 1、12 章）"),
        ],
    )
    svg.text(48, by + 54, "图里没画的", size=15, bold=True, anchor="start")
    package_row(
        svg,
        by + 54,
        [
            (160, "minisgl.llm", "离线接口（第 7 章）"),
            (400, "minisgl.kernel", "自定义算子（第 19 章）"),
            (680, "minisgl.moe", "MoE（第 20 章）"),
        ],
    )
    svg.text(
        48,
        by + 76,
        "第 0 章的单文件引擎 ≈ 只有一个 rank、一条请求、没有进程与调度的 Engine。",
        size=13,
        color=MUTED,
        anchor="start",
    )
    return svg.render([ZMQ, HTTP])


DIAGRAMS = {"ch00_architecture.svg": ch00_architecture}


def main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(prog=PROG, description="生成书里的示意图（docs/assets/ 下的 SVG）。",
                                epilog=f"示例：\n  {PROG}            重新生成全部图\n"
                                       f"  {PROG} --check    只检查已提交的 SVG 与生成结果一致")
    parser.add_argument("--check", action="store_true", help="只检查，不写文件")
    parser.set_defaults(func=generate)
    return cli.dispatch(parser, argv)


def generate(args: argparse.Namespace) -> int:
    stale = []
    for name, make in DIAGRAMS.items():
        path = ASSETS / name
        content = make()
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != content:
                stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            print(f"写入 {path.relative_to(ASSETS.parent.parent)}")
    if stale:
        print("这些图与 tools/diagrams.py 的输出不一致，请重新生成：" + "、".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    cli.run(main)
