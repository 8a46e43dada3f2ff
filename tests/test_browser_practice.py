"""网站上的练习：只用标准库的题在浏览器里评测（Pyodide + Web Worker），用的是和本地 judge.py 同一份
test.py、judgekit.py。

(a) 不开浏览器：页面里嵌的文件就是 practice/ 里的原文件和 minibook/browser_judge.py；在 Pyodide 里跑
    评测的 browser_judge.py 放到普通 CPython 里，结论和 practice/judge.py 一字不差；取不到 Pyodide 时网站
    照样 --strict 构建，页面上换成说明；要 torch 的题说明为什么只能在本地做。
(b) 真浏览器：构建网站，用 http.server 在 127.0.0.1 上提供（file:// 下 worker 和 wasm 都不让用），
    用 playwright 驱动系统里的 Chromium：起始代码 → 未通过，参考答案 → 通过，死循环 → 超时，
    然后新的 worker 再次通过；代码存在 localStorage 里，重置恢复起始代码。
(c) 浏览器里的边界：学习者的代码在 worker 里另一个 Pyodide 解释器里，那里没有评测的文件；冲着共用的
    JS 世界去的作弊（自己发结论、读 worker 的变量、改 JSON / String.fromCharCode）都换不来“通过”。
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibook import browser_judge, judging, practice, pyodide

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EXERCISES = practice.exercises()
STDLIB = [ex for ex in EXERCISES if ex.stdlib_only]
# 真浏览器里做的那道题：“批的 positions 与 cu_seqlens”（只用标准库，starter 是一份有 bug 的实现）。
# 按 slug 找，编号随清单变。
SAMPLE = next(ex for ex in EXERCISES if ex.slug == "batch_positions")
TEST_TIMEOUT = 2  # 秒：页面网址里的 ?timeout=，让死循环那一步快一点


def build_site(site_dir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict 失败：\n{proc.stdout}\n{proc.stderr}"
    return proc


def page_job(html: str) -> dict:
    match = re.search(r'<script type="application/json" class="practice-data">(.*?)</script>', html, re.S)
    assert match, "页面里没有嵌评测材料"
    return json.loads(match.group(1))


# ---------------------------------------------------------------- (a) 不开浏览器


@pytest.mark.parametrize("ex", STDLIB, ids=lambda ex: ex.name)
def test_page_embeds_the_real_judge_files(ex):
    job = practice.browser_job(ex)
    assert job["starter"] == ex.file("starter.py").read_text(encoding="utf-8")
    assert job["files"] == {"judgekit.py": (REPO / "practice" / "judgekit.py").read_text(encoding="utf-8"),
                            "isolation.py": (REPO / "practice" / "isolation.py").read_text(encoding="utf-8"),
                            f"{ex.name}/test.py": ex.file("test.py").read_text(encoding="utf-8")}
    assert job["harness"] == Path(browser_judge.__file__).read_text(encoding="utf-8")  # 一个真文件，原样嵌入
    page = practice.exercise_page(ex, browser=True)
    assert f'data-timeout="{ex.time_limit:g}"' in page and f"时间限制 {ex.time_limit:g} 秒" in page
    assert page_job(page) == job  # 转义过的 JSON 读回来一模一样
    assert "</script>" not in page.split('class="practice-data">')[1].split("</script>")[0]
    solution = ex.file("solution.py").read_text(encoding="utf-8")
    assert solution not in page, "参考答案不该出现在网页上"
    for label in ("运行测试", "重置为起始代码"):
        assert label in page


def test_pages_without_pyodide_or_without_stdlib():
    page = practice.exercise_page(SAMPLE, browser=False)
    assert "practice-runner" not in page and pyodide.FETCH_HINT in page and "python practice/judge.py" in page
    torch_exercises = [ex for ex in EXERCISES if not ex.stdlib_only]
    assert torch_exercises
    for ex in torch_exercises:  # 要 torch 的题：浏览器里没有 PyTorch，只在本地评测，页面上说清楚为什么
        for browser in (True, False):
            page = practice.exercise_page(ex, browser=browser)
            assert "practice-runner" not in page and pyodide.FETCH_HINT not in page
            why = ex.local_only_reason or "PyTorch"  # 没写原因的，原因就是要用 PyTorch
            assert "只能在本地评测" in page and why.rstrip("。") in page and f"judge.py test {ex.number}" in page
            assert ("PyTorch" in page) == (not ex.local_only_reason), ex.name
    for ex in STDLIB:
        assert "只能在本地评测" not in practice.exercise_page(ex, browser=True)


def harness_verdict(ex, code: str, tmp_path: Path, seed: int) -> dict:
    """在子进程的 CPython 里运行 minibook/browser_judge.py（浏览器里 worker 跑的就是它），评测 code。"""
    job = practice.browser_job(ex)
    job["seed"] = seed
    job["root"] = str(tmp_path / "practice")
    job["files"] = {**job["files"], job["target"]: code}
    scratch = tmp_path / "tmpdir"  # 评测用的临时目录建在这里：评测完应当一个不剩
    scratch.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "minibook.browser_judge"], input=json.dumps(job),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert proc.returncode == 0, proc.stderr
    assert list(scratch.iterdir()) == [], "评测留下了临时目录"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("ex", STDLIB, ids=lambda ex: ex.name)
def test_harness_gives_the_same_verdict_as_judge(ex, tmp_path):
    cases = {
        "starter": ex.file("starter.py").read_text(encoding="utf-8"),
        "solution": ex.file("solution.py").read_text(encoding="utf-8"),
        "empty": '"""什么都没写。"""\n',
        "syntax": "def f(:\n    pass\n",
        "crash": "x = 1 / 0\n",
    }
    for name, code in cases.items():
        local_file = tmp_path / f"{name}.py"
        local_file.write_text(code, encoding="utf-8")
        local = judging.run_test(ex, local_file)
        browser = harness_verdict(ex, code, tmp_path / name, local.seed)  # 同一个随机种子
        assert browser["verdict"] == local.kind, (name, browser, local)
        if name == "crash":  # 导入时出错：消息一样，traceback 里的路径不同
            assert browser["message"] == local.message and "ZeroDivisionError" in browser["detail"]
        else:
            assert browser["message"] == local.message, name
        if name == "syntax":
            assert (browser["line"], browser["offset"], browser["text"]) == (local.line, local.offset, local.text)


def test_no_pyodide_still_builds(tmp_path):
    """取不到 Pyodide（这里用一个不存在的 tarball 模拟）：--strict 照样构建，页面上是说明，缓存里不留半成品。"""
    env = {"MINISGL_CACHE": str(tmp_path / "cache"), "MINISGL_PYODIDE_TARBALL": str(tmp_path / "nope.tgz")}
    proc = build_site(tmp_path / "site", env)
    assert "浏览器里运行练习暂不可用" in proc.stdout + proc.stderr
    html = (tmp_path / "site" / "practice" / SAMPLE.name / "index.html").read_text(encoding="utf-8")
    assert "python -m minibook.pyodide fetch" in html and "practice-editor" not in html
    assert not (tmp_path / "site" / "assets" / "pyodide").exists()
    assert not list((tmp_path / "cache").glob("pyodide-*"))


def test_fetch_rejects_a_bad_tarball(tmp_path, monkeypatch):
    bad = tmp_path / "pyodide-0.27.7.tgz"
    bad.write_bytes(b"not really a tarball")
    monkeypatch.setenv("MINISGL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MINISGL_PYODIDE_TARBALL", str(bad))
    with pytest.raises(pyodide.PyodideFetchError, match="校验和不对"):
        pyodide.fetch()
    assert pyodide.find_pyodide() is None
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".pyodide-0.27.7.lock"]  # 没有半成品


# ---------------------------------------------------------------- (b) 真浏览器


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site_url(tmp_path_factory, request):
    if CHROMIUM is None:
        pytest.skip("没有安装 chromium（Debian：apt-get install chromium），跳过浏览器里的评测")
    if pyodide.ensure_pyodide() is None:
        pytest.skip(f"取不到 Pyodide（见上面的原因；CI 里先运行 {pyodide.FETCH_HINT}），跳过浏览器里的评测")
    # 会话里共用的那份构建（tests/conftest.py）；它若是在取到 Pyodide 之前构建的、没带上 Pyodide，就自己再构建一份
    site_dir = request.getfixturevalue("real_site_dir")
    if not (site_dir / "assets" / "pyodide" / "pyodide.asm.wasm").is_file():
        site_dir = tmp_path_factory.mktemp("browser") / "site"
        build_site(site_dir)
    assert (site_dir / "assets" / "pyodide" / "pyodide.asm.wasm").is_file()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(site_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "http.server 没有起来"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(site_url):
    sync_api = pytest.importorskip("playwright.sync_api", reason="没有安装 playwright（pip install -e . 会装上）")
    with sync_api.sync_playwright() as p:
        # 用系统的 Chromium（不需要 playwright install 下载浏览器）
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})  # 每个测试一份新的 localStorage
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert not errors, f"页面上的 JS 出错：{errors}"


def run_and_wait(page) -> tuple[str, str, float]:
    """点「运行测试」，等结论出来：(提示框的种类, 结论的文字, 用了几秒)。"""
    start = time.monotonic()
    page.click('.practice-runner [data-action="run"]')
    box = page.wait_for_selector(".practice-verdict .admonition", timeout=60_000)
    kind = box.get_attribute("class").split()[-1]
    return kind, box.inner_text(), time.monotonic() - start


def test_judge_in_the_browser(page, site_url, tmp_path):
    starter = SAMPLE.file("starter.py").read_text(encoding="utf-8")
    solution = SAMPLE.file("solution.py").read_text(encoding="utf-8")
    page.goto(f"{site_url}/practice/{SAMPLE.name}/?timeout={TEST_TIMEOUT}")
    editor = page.locator(".practice-editor")
    assert editor.input_value() == starter and "judge.py" not in starter  # 编辑框里不叫人运行命令

    # 起始代码：未通过，消息和本地 judge.py 评测同一个文件时一样
    local = judging.run_test(SAMPLE, SAMPLE.file("starter.py"))
    kind, text, first = run_and_wait(page)
    assert kind == "failure" and "未通过" in text, text
    assert local.message.split("\n  （这次的随机种子")[0] in text  # 种子是网页自己抽的

    # 参考答案：通过
    editor.fill(solution)
    kind, text, seconds = run_and_wait(page)
    assert kind == "success" and "通过！" in text, text

    # 模块顶上的死循环：到时间限制被结束，报超时
    editor.fill("while True:\n    pass\n")
    kind, text, seconds = run_and_wait(page)
    assert kind == "warning" and "超时" in text and f"{TEST_TIMEOUT} 秒" in text, text
    cutoff = 2 * TEST_TIMEOUT + 2  # 和本地一样：学习者那边还要替评测传话，到 2 × 限制 + 2 秒才停下
    assert cutoff - 0.2 < seconds < cutoff + 8, seconds

    # 新的 worker（重新加载 Pyodide）照样评测
    editor.fill(solution)
    kind, text, again = run_and_wait(page)
    assert kind == "success", text
    print(f"\n首次评测（含加载 Pyodide）{first:.1f} 秒；超时后换新 worker 再评测 {again:.1f} 秒")

    page.locator(".practice-verdict").scroll_into_view_if_needed()
    shot = tmp_path / f"{SAMPLE.name}.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    print(f"截图：{shot}")


def test_syntax_error_and_crash_in_the_browser(page, site_url):
    page.goto(f"{site_url}/practice/{SAMPLE.name}/")
    editor = page.locator(".practice-editor")
    editor.fill("def extend_lens(spans:\n    pass\n")
    kind, text, _ = run_and_wait(page)
    assert kind == "bug" and "语法错误：第 1 行" in text, text

    editor.fill("print('算到这里了')\nraise RuntimeError('坏了')\n")
    kind, text, _ = run_and_wait(page)
    assert kind == "danger" and "运行时崩溃" in text and "RuntimeError: 坏了" in text, text
    assert "算到这里了" in text  # 学习者打印的内容也显示出来


def test_code_is_kept_and_reset(page, site_url):
    starter = SAMPLE.file("starter.py").read_text(encoding="utf-8")
    url = f"{site_url}/practice/{SAMPLE.name}/"
    page.goto(url)
    editor = page.locator(".practice-editor")
    editor.fill("x = 1\n")
    editor.press("End")
    editor.press("Tab")  # Tab 插入 4 个空格，不离开编辑框
    assert editor.input_value() == "x = 1\n    "
    page.reload()
    assert page.locator(".practice-editor").input_value() == "x = 1\n    "  # 存在 localStorage 里

    page.once("dialog", lambda dialog: dialog.accept())  # “丢掉现在的代码？”
    page.click('.practice-runner [data-action="reset"]')
    assert page.locator(".practice-editor").input_value() == starter
    page.reload()
    assert page.locator(".practice-editor").input_value() == starter


BROWSER_EXERCISES = [ex for ex in EXERCISES if ex.stdlib_only and ex is not SAMPLE]


@pytest.mark.parametrize("ex", BROWSER_EXERCISES, ids=[ex.name for ex in BROWSER_EXERCISES])
def test_every_stdlib_exercise_is_judged_in_the_browser(page, site_url, ex):
    """网站说“只用标准库的题可以直接在浏览器里做”：每一道的 test.py 都真的在 Pyodide 里把参考答案判成通过。
    起始代码判成未通过，本地的 test_judge 每道题都查；浏览器里那条路（未通过、超时、作弊）由上面的 SAMPLE 走过。"""
    page.goto(f"{site_url}/practice/{ex.name}/")
    page.locator(".practice-editor").fill(ex.file("solution.py").read_text(encoding="utf-8"))
    kind, text, _ = run_and_wait(page)
    assert kind == "success" and "通过！" in text, text


# 浏览器里的作弊：学习者的代码在另一个 Pyodide 解释器里，和评测只共用一个 JS 世界（realm）。
# 每一招都冲着这个共用的世界去：要么自己给页面发“通过”，要么改掉评测读结论时要经过的内置对象。
# 没有一招可以换来“通过”（参考答案也不在网页上），只能判未通过或崩溃
PASSED = '{"verdict": "passed", "message": "全部检查通过"}'


def js_cheat(code: str) -> str:
    """一份学习者的代码：经 Pyodide 的 js 模块在 worker 的全局作用域里执行 code。"""
    return "import js\njs.eval(\'\'\'" + code + "\'\'\')\n"


BROWSER_CHEATS = {
    # 直接给页面发一个“通过”：postMessage 只留在 worker 的函数里，全局对象上已经没有了
    "post_a_verdict": js_cheat(f'postMessage({{type: "verdict", verdict: {PASSED}}})'),
    # 读 worker 里的变量（评测的解释器、bridge）：它们是函数里的局部变量，全局作用域里没有
    "read_worker_variables": js_cheat("ready"),
    # 换掉 JSON.parse，让评测读回来的结论变成“通过”
    "replace_json_parse": js_cheat(f"JSON.parse = () => ({PASSED})"),
    # 改写字符：评测解释器交出的结论（Python 的 str）在 JS 里是一个字符一个字符经 String.fromCharCode 拼起来的；
    # 在 "verdict": " 后面把 failed 换成等长的 passed
    "rewrite_the_verdict": js_cheat("const fromCharCode = String.fromCharCode;\n"
                                    "let seen = '', left = 0;\n"
                                    "String.fromCharCode = function (...codes) {\n"
                                    "  let out = fromCharCode.apply(String, codes);\n"
                                    "  if (codes.length === 1) {\n"
                                    "    if (left > 0) { out = 'passed'[6 - left]; left -= 1; }\n"
                                    "    seen = (seen + out).slice(-12);\n"
                                    "    if (seen === '\"verdict\": \"') left = 6;\n"
                                    "  }\n"
                                    "  return out;\n"
                                    "};"),
    # 找 test.py 和参考答案：学习者的解释器里没有这些文件，__main__ 也不是 test.py
    "look_for_test_files": "import os, sys\n"
                           "print(os.listdir('/home/pyodide'))\n"
                           "print(sys.modules['__main__'].__file__)\n",
}


@pytest.mark.parametrize("name", list(BROWSER_CHEATS))
def test_the_answer_cannot_reach_the_judge_in_the_browser(page, site_url, name):
    page.goto(f"{site_url}/practice/{SAMPLE.name}/")
    page.locator(".practice-editor").fill(BROWSER_CHEATS[name])
    kind, text, _ = run_and_wait(page)
    assert kind in ("failure", "danger") and "通过！" not in text, text
    assert "同一个解释器" not in text  # 评测确实在另一个解释器里（没有退回同一个解释器的做法）


def test_the_learners_interpreter_holds_neither_test_nor_reference(page, site_url):
    """学习者那个解释器里看得到什么：没有评测的文件，没有带文件的评测模块，__main__ 不是 test.py。"""
    probe = ("import os, sys\n"
             "seen = sorted(os.listdir('/home/pyodide'))\n"
             "names = ['judge' + 'kit', 'browser' + '_judge', '__main__']\n"
             "mods = [m for m in names if getattr(sys.modules.get(m), '__file__', None)]\n"
             "raise RuntimeError(f'文件 {seen}；带文件的模块 {mods}')\n")
    page.goto(f"{site_url}/practice/{SAMPLE.name}/")
    page.locator(".practice-editor").fill(probe)
    kind, text, _ = run_and_wait(page)
    assert kind == "danger" and "RuntimeError: 文件 []；带文件的模块 []" in text, text
