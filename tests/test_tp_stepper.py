"""第 16 章的张量并行逐步演示（docs/assets/tp-stepper.js / .css）在真的无头 Chromium 里。

页面就是章节里贴的那段 HTML（docs/assets/tp-stepper.snippet.html）加上两个资源文件，从临时目录用
file:// 打开；浏览器由 test_site.py 的 browser 夹具启动（系统的 chromium，没有就跳过）。检查：
起始状态；← → Home End 换步、步骤条的高亮跟着走；TP 按钮与数字键换 TP 后每个 rank 的形状
（TP=2 的 qkv_proj 2048 × 1024 …，TP=16 时 16 个 rank、rank 0 和 1 共用 KV 头 0）；
每层 2 次 all-reduce、28 层一次前向 57 次 all-reduce 和 1 次 all-gather；
1280×800 时每个 TP、每一步都不横向溢出正文列；没有 JS 错误；没有容器的页面上脚本什么也不做。
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from test_site import CHROMIUM, browser  # noqa: F401  （browser 是夹具：没有 chromium / playwright 时跳过）

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "docs" / "assets"
SNIPPET = (ASSETS / "tp-stepper.snippet.html").read_text(encoding="utf-8")
QWEN3 = json.loads((REPO / "tools" / "minibook" / "configs" / "qwen3-0.6b" / "config.json").read_text(encoding="utf-8"))
COLUMN_PX = 930  # 1280 px 宽时 mkdocs-material 正文列的宽度（toc.integrate，见 mkdocs.yml）

PAGE = """<!doctype html>
<html lang="zh"><head><meta charset="utf-8"><title>tp-stepper</title>
<link rel="stylesheet" href="{css}">
<style>body {{ margin: 0; font-family: sans-serif; font-size: 16px; }}
main {{ width: {column}px; margin: 0 auto; }}</style>
</head><body><main class="md-typeset">
<p>前面的正文。</p>
{snippet}
<p>后面的正文。</p>
</main><script src="{js}"></script></body></html>
"""


def snippet_config() -> dict:
    match = re.search(r"data-config='([^']*)'", SNIPPET)
    assert match, "snippet 里没有 data-config='…'"
    return json.loads(html.unescape(match.group(1)))


def test_snippet_config_is_qwen3_config():
    """演示里的形状全由 data-config 算出；这些数与仓库里 Qwen3-0.6B 的 config.json 一致。"""
    cfg = snippet_config()
    hf_keys = [k for k in cfg if k in QWEN3]
    assert {"hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "vocab_size", "num_hidden_layers", "tie_word_embeddings"} <= set(hf_keys)
    assert {k: cfg[k] for k in hf_keys} == {k: QWEN3[k] for k in hf_keys}
    assert cfg["tp"] == [1, 2, 4, 16] and cfg["tp_default"] == 2


@pytest.fixture
def page_file(tmp_path) -> Path:
    path = tmp_path / "tp.html"
    path.write_text(PAGE.format(css=(ASSETS / "tp-stepper.css").as_uri(), js=(ASSETS / "tp-stepper.js").as_uri(),
                                snippet=SNIPPET, column=COLUMN_PX), encoding="utf-8")
    return path


@pytest.fixture
def tab(browser, page_file):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.goto(page_file.as_uri())
    tab.wait_for_selector(".tp-stepper[data-tp-mounted] .tps-row[data-rank]")
    tab.errors = errors
    yield tab
    context.close()
    assert not errors, f"页面上的 JS 出错：{errors}"


W = ".tp-stepper"


def state(tab) -> dict:
    return tab.evaluate("""() => {
      const w = document.querySelector('.tp-stepper');
      const active = [...w.querySelectorAll('.tps-chip[aria-current="step"]')];
      return {step: Number(w.dataset.step), tp: Number(w.dataset.tp),
              title: w.querySelector('.tps-step-title').textContent,
              counter: w.querySelector('.tps-counter').textContent,
              active: active.map(c => Number(c.dataset.step)),
              activeClass: active.map(c => c.classList.contains('tps-active')),
              pressed: [...w.querySelectorAll('.tps-tp[aria-pressed="true"]')].map(b => b.textContent),
              ranks: w.querySelectorAll('.tps-row[data-rank]').length};
    }""")


def rows(tab) -> list[dict]:
    """当前这一步每个 rank 一行：左栏（权重 / 输入）和右栏（输出）的形状与说明。"""
    return tab.evaluate("""() => [...document.querySelectorAll('.tp-stepper .tps-row[data-rank]')].map(r => ({
      rank: Number(r.dataset.rank),
      left: r.querySelector('.tps-left .tps-shape').textContent,
      leftDetail: (r.querySelector('.tps-left .tps-detail') || {}).textContent || '',
      right: r.querySelector('.tps-right .tps-shape').textContent,
      rightTag: (r.querySelector('.tps-right .tps-tag') || {}).textContent || ''}))""")


def goto_chip(tab, label: str) -> None:
    tab.locator(f"{W} .tps-chip", has_text=label).first.click()


def facts(tab) -> str:
    return " | ".join(tab.locator(f"{W} .tps-fact").all_text_contents())


def test_initial_state(tab):
    s = state(tab)
    assert s["step"] == 0 and s["tp"] == 2 and s["pressed"] == ["2"] and s["ranks"] == 2
    assert "embed_tokens" in s["title"] and s["counter"] == "1 / 17"
    assert s["active"] == [0] and s["activeClass"] == [True]
    assert tab.locator(f"{W} .tps-nav", has_text="上一步").is_disabled()
    r = rows(tab)
    assert [x["left"] for x in r] == ["75968 × 1024"] * 2
    assert r[0]["leftDetail"] == "词表第 0–75967 行" and r[1]["leftDetail"] == "词表第 75968–151935 行"
    assert [x["rightTag"] for x in r] == ["部分和"] * 2  # 词表外的 token 是 0：还要 all-reduce
    assert tab.get_attribute(W, "tabindex") == "0" and "张量并行" in tab.get_attribute(W, "aria-label")


def test_keyboard_steps_and_highlight(tab):
    tab.focus(W)
    tab.keyboard.press("ArrowRight")
    s = state(tab)
    assert s["step"] == 1 and s["active"] == [1] and s["counter"] == "2 / 17"
    assert "all-reduce" in s["title"] and tab.locator(f"{W} .tps-commband").count() == 1
    tab.keyboard.press("ArrowRight")
    assert state(tab)["step"] == 2
    tab.keyboard.press("ArrowLeft")
    tab.keyboard.press("ArrowLeft")
    assert state(tab)["step"] == 0
    tab.keyboard.press("ArrowLeft")  # 已经是第一步：不动
    assert state(tab)["step"] == 0
    tab.keyboard.press("End")
    s = state(tab)
    assert s["step"] == 16 and "采样" in s["title"] and s["active"] == [16] and s["counter"] == "17 / 17"
    assert tab.locator(f"{W} .tps-nav", has_text="下一步").is_disabled()
    tab.keyboard.press("Home")
    s = state(tab)
    assert s["step"] == 0 and "embed_tokens" in s["title"] and s["active"] == [0]
    # 鼠标：下一步按钮、点步骤条
    tab.locator(f"{W} .tps-nav", has_text="下一步").click()
    assert state(tab)["step"] == 1
    goto_chip(tab, "qkv_proj")
    s = state(tab)
    assert "qkv_proj" in s["title"] and s["active"] == [s["step"]]
    # 焦点在步骤按钮上时方向键照样换步，焦点跟着高亮走
    tab.keyboard.press("ArrowRight")
    s = state(tab)
    assert "注意力" in s["title"]
    assert tab.evaluate("() => document.activeElement.getAttribute('aria-current')") == "step"


def test_tp2_per_rank_shapes(tab):
    tab.locator(f"{W} .tps-tp", has_text="2").first.click()
    expect = {  # 步骤条上的名字 → 每个 rank 的权重形状（TP=2）
        "embed_tokens": "75968 × 1024",
        "qkv_proj": "2048 × 1024",
        "o_proj": "1024 × 1024",
        "gate_up_proj": "3072 × 1024",
        "down_proj": "1024 × 1536",
        "lm_head": "75968 × 1024",
    }
    for chip, shape in expect.items():
        goto_chip(tab, chip)
        assert [r["left"] for r in rows(tab)] == [shape, shape], chip
    goto_chip(tab, "qkv_proj")
    assert "(8 + 2·4)·128 = 2048 × 1024" in facts(tab) and "4096 × 1024" in facts(tab)
    r = rows(tab)
    assert r[0]["leftDetail"] == "q 头 0–7 · KV 头 0–3" and r[1]["leftDetail"] == "q 头 8–15 · KV 头 4–7"
    assert [x["right"] for x in r] == ["[N, 2048]"] * 2 and r[0]["rightTag"] == "分片"
    goto_chip(tab, "gate_up_proj")
    assert "2·1536 = 3072 × 1024" in facts(tab)
    goto_chip(tab, "o_proj")
    assert [x["rightTag"] for x in rows(tab)] == ["部分和"] * 2
    goto_chip(tab, "all-gather")
    assert [x["right"] for x in rows(tab)] == ["[N, 151936]"] * 2 and "拼接" in state(tab)["title"]


def test_tp16_replicates_kv_heads(tab):
    tab.focus(W)
    tab.keyboard.press("4")  # 第 4 个 TP：16
    s = state(tab)
    assert s["tp"] == 16 and s["pressed"] == ["16"] and s["ranks"] == 16
    goto_chip(tab, "qkv_proj")
    r = rows(tab)
    assert [x["rank"] for x in r] == list(range(16))
    assert all(x["left"] == "384 × 1024" for x in r)
    assert "(1 + 2·1)·128 = 384 × 1024" in facts(tab)
    assert r[0]["leftDetail"] == "q 头 0 · KV 头 0（与 rank 1 共用）"
    assert r[1]["leftDetail"] == "q 头 1 · KV 头 0（与 rank 0 共用）"
    assert r[2]["leftDetail"] == "q 头 2 · KV 头 1（与 rank 3 共用）"
    assert r[15]["leftDetail"] == "q 头 15 · KV 头 7（与 rank 14 共用）"
    assert "KV 头 0 → rank 0、1" in tab.text_content(f"{W} .tps-text")
    goto_chip(tab, "注意力")
    r = rows(tab)
    assert r[0]["leftDetail"] == "KV 头 0（与 rank 1 共用）" and r[1]["leftDetail"] == "KV 头 0（与 rank 0 共用）"
    assert r[0]["left"] == "k、v 各 [槽位, 1, 128]" and r[0]["right"] == "[N, 128]"
    goto_chip(tab, "embed_tokens")
    assert all(x["left"] == "9496 × 1024" for x in rows(tab))
    # T 轮换到下一个 TP（16 之后回到 1），数字键 3 是 TP=4
    tab.keyboard.press("t")
    assert state(tab)["tp"] == 1 and state(tab)["ranks"] == 1
    tab.keyboard.press("3")
    assert state(tab)["tp"] == 4 and state(tab)["ranks"] == 4


def summary(tab) -> dict:
    return tab.evaluate("""() => Object.fromEntries([...document.querySelectorAll('.tp-stepper [data-role]')]
        .map(e => [e.dataset.role, e.textContent]))""")


def test_communication_counts(tab):
    for tp in ("2", "4", "16"):
        tab.locator(f"{W} .tps-tp", has_text=tp).first.click()
        s = summary(tab)
        assert (s["layer-allreduce"], s["layers"], s["total-allreduce"], s["total-allgather"]) == ("2", "28", "57", "1"), tp
    goto_chip(tab, "×28 层")
    assert state(tab)["title"] == "其余 27 层：重复第 3–12 步"
    assert tab.locator(f"{W} .tps-ladder .tps-dot").count() == 57
    assert tab.locator(f"{W} .tps-ladder .tps-square").count() == 1
    assert (summary(tab)["upto-allreduce"], summary(tab)["upto-allgather"]) == ("57", "0")
    tab.focus(W)
    tab.keyboard.press("End")
    assert (summary(tab)["upto-allreduce"], summary(tab)["upto-allgather"]) == ("57", "1")
    # 一层里恰好两个 all-reduce 步骤（o_proj 之后、down_proj 之后），步骤条上有 3 个（加上嵌入的），1 个 all-gather
    assert tab.locator(f"{W} .tps-chip-comm", has_text="all-reduce").count() == 3
    assert tab.locator(f"{W} .tps-group-layer .tps-chip-comm").count() == 2
    assert tab.locator(f"{W} .tps-chip-comm", has_text="all-gather").count() == 1
    # 通信量：N = 8、bf16 时一次 all-reduce 的张量 [8, 1024] = 16 KiB；换成 float32 翻倍
    goto_chip(tab, "all-reduce")
    assert "[8, 1024] bf16 = 16 KiB" in facts(tab)
    tab.select_option(f"{W} .tps-dtype", "float32")
    assert "[8, 1024] float32 = 32 KiB" in facts(tab)
    # TP=1：只有一个 rank，通信全部跳过
    tab.locator(f"{W} .tps-tp", has_text="1").first.click()
    assert "实际 0 次" in summary(tab)["tp1-note"]


def test_fits_the_column_at_1280(tab):
    """每个 TP、每一步：演示不比正文列宽，自己不横向滚动，每个 rank 的格子里的字也不溢出格子。"""
    tab.focus(W)
    bad = []
    for key, tp in (("1", 1), ("2", 2), ("3", 4), ("4", 16)):
        tab.keyboard.press(key)
        tab.keyboard.press("Home")
        for step in range(17):
            m = tab.evaluate("""() => {
              const w = document.querySelector('.tp-stepper'), col = w.parentElement;
              const cells = [...w.querySelectorAll('.tps-cell, .tps-info')].filter(c => c.scrollWidth > c.clientWidth + 1);
              return {col: [col.scrollWidth, col.clientWidth], own: [w.scrollWidth, w.clientWidth],
                      cells: cells.map(c => c.textContent.slice(0, 40)),
                      right: w.getBoundingClientRect().right, colRight: col.getBoundingClientRect().right,
                      step: Number(w.dataset.step), tp: Number(w.dataset.tp)};
            }""")
            assert (m["tp"], m["step"]) == (tp, step)
            if (m["col"][0] > m["col"][1] or m["own"][0] > m["own"][1] or m["right"] > m["colRight"] + 0.5
                    or m["cells"]):
                bad.append((tp, step, m))
            tab.keyboard.press("ArrowRight")
    assert tab.evaluate("() => document.querySelector('.tp-stepper').parentElement.clientWidth") == COLUMN_PX
    assert not bad, f"横向溢出：{bad}"


def test_does_nothing_without_a_container(browser, tmp_path):  # noqa: F811
    path = tmp_path / "plain.html"
    path.write_text(f'<!doctype html><html><body><p id="x">正文</p><script src="{(ASSETS / "tp-stepper.js").as_uri()}">'
                    "</script></body></html>", encoding="utf-8")
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(path.as_uri())
    body = tab.evaluate("() => document.body.children.length")
    tab.close()
    assert body == 2 and not errors  # <p> 和 <script>，没有多出任何东西
