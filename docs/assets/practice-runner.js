// 练习页上的“在浏览器里做”：编辑框、运行测试、重置为起始代码，以及把评测结论写成和
// 命令行 practice/judge.py 一样的中文。真正的评测在 practice-worker.js 里：它用 Pyodide
// 运行题目自己的 test.py，结论（通过 / 未通过 / 语法错误 / 运行时崩溃）由 judgekit.py 判定；
// 这里只多管一件事：超时。
//
// 页面里的 .practice-runner 由 tools/minibook/practice.py 生成，其中 <script class="practice-data">
// 是构建时嵌进去的起始代码、test.py、judgekit.py，所以评测时除了 Pyodide 不需要再下载别的。
(function () {
  "use strict";

  const WORKER_URL = new URL("practice-worker.js", document.currentScript.src);
  const OUTPUT_LINES = 12; // 和 judge.py 一样，只显示学习者打印的最后几行
  const LOAD_LIMIT = 60; // 秒：加载 Pyodide 最多等这么久，文件缺失或网络太慢时不要一直转圈

  // 结论 → material 主题现成的提示框样式（每种自带图标和颜色）
  const LOOK = {
    passed: "success",
    failed: "failure",
    timeout: "warning",
    syntax: "bug",
    crash: "danger",
    error: "danger",
  };

  document.querySelectorAll(".practice-runner").forEach(setup);

  function setup(root) {
    const data = JSON.parse(root.querySelector(".practice-data").textContent);
    const editor = root.querySelector(".practice-editor");
    const runButton = root.querySelector('[data-action="run"]');
    const resetButton = root.querySelector('[data-action="reset"]');
    const status = root.querySelector(".practice-status");
    const verdictBox = root.querySelector(".practice-verdict");
    // 时间限制：页面上写的默认值；网址里加 ?timeout=秒数 可以改（测试用它缩短等死循环的时间）
    const limit = Number(new URLSearchParams(location.search).get("timeout")) || Number(root.dataset.timeout);
    const storageKey = "minisgl-book:practice:" + data.exercise;

    // 每次评测用一个新的 worker（新的 Python 解释器）：学习者的代码改掉的东西（比如给标准库模块
    // 打的补丁）带不到下一次评测。评测完就在后台把下一个 worker 热起来，省下下次加载 Pyodide 的等待
    let worker = null;
    let warm = false; // 是否已经成功评测过一次（决定状态栏怎么说：之后 Pyodide 的文件已在浏览器缓存里）

    editor.value = loadCode() ?? data.starter;
    editor.addEventListener("input", () => saveCode(editor.value));
    editor.addEventListener("keydown", onKeydown);
    editor.addEventListener("focus", ensureWorker, { once: true }); // 学习者开始写，就在后台加载 Pyodide
    runButton.addEventListener("click", run);
    resetButton.addEventListener("click", reset);

    // 代码存在这个浏览器的 localStorage 里，每道题一份；隐私模式下存不了也不影响做题
    function loadCode() {
      try {
        return localStorage.getItem(storageKey);
      } catch {
        return null;
      }
    }

    function saveCode(code) {
      try {
        if (code === data.starter) localStorage.removeItem(storageKey);
        else localStorage.setItem(storageKey, code);
      } catch {
        /* 存不了就算了 */
      }
    }

    // Tab 插入 4 个空格（Python 的缩进）。键盘用户先按 Esc 再按 Tab，就能照常离开编辑框。
    let escaped = false;
    function onKeydown(event) {
      if (event.key === "Escape") {
        escaped = true;
        return;
      }
      const plainTab = event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey;
      if (plainTab && !escaped) {
        event.preventDefault();
        // execCommand 插入的文字能用 Ctrl-Z 撤销；直接改 value 会清空撤销记录，所以只作后备
        if (!document.execCommand("insertText", false, "    ")) {
          editor.setRangeText("    ", editor.selectionStart, editor.selectionEnd, "end");
          saveCode(editor.value);
        }
      }
      escaped = false;
    }

    function reset() {
      if (editor.value !== data.starter && !confirm("把编辑框恢复成起始代码？你现在写的代码会被丢掉。")) return;
      editor.value = data.starter;
      saveCode(data.starter);
      verdictBox.replaceChildren();
    }

    function ensureWorker() {
      if (worker === null) {
        worker = new Worker(WORKER_URL);
      }
      return worker;
    }

    function run() {
      const code = editor.value;
      saveCode(code);
      runButton.disabled = true;
      verdictBox.replaceChildren();
      status.textContent = warm ? "正在评测…" : "正在加载浏览器里的 Python（第一次要几秒）…";
      const output = [];
      let started = 0;
      let timer = setTimeout(() => {
        discardWorker();
        finish({ verdict: "error", message: `${LOAD_LIMIT} 秒内没能加载浏览器里的 Python。` });
      }, LOAD_LIMIT * 1000);

      const current = ensureWorker();
      current.onmessage = ({ data: message }) => {
        if (message.type === "started") {
          status.textContent = "正在评测…";
          started = performance.now();
          clearTimeout(timer); // 加载完了，换成学习者代码的时间限制
          // 和本地 judgekit.Child 一样到 2 × 限制 + 2 秒才停下：学习者的解释器还要替评测来回传话，
          // 每次调用都跨一次解释器，参考答案在这里也要用掉限制的大半
          timer = setTimeout(onTimeout, (2 * limit + 2) * 1000);
        } else if (message.type === "stdout") {
          output.push(message.line);
          if (output.length > OUTPUT_LINES) output.shift();
        } else if (message.type === "verdict") {
          warm = true;
          discardWorker(); // 用过的解释器不再用
          ensureWorker();
          finish(message.verdict);
        } else if (message.type === "error") {
          discardWorker();
          finish({ verdict: "error", message: message.message });
        }
      };
      current.onerror = (event) => {
        // 比如 assets/pyodide/ 里的文件没拷进网站：worker 连 pyodide.js 都加载不了
        event.preventDefault();
        discardWorker();
        finish({ verdict: "error", message: event.message || "评测线程启动失败" });
      };

      // 死循环：Python 停不下来，只能结束整个 worker；下一次评测会新建一个
      function onTimeout() {
        discardWorker();
        finish({ verdict: "timeout" });
      }

      function discardWorker() {
        current.terminate();
        if (worker === current) worker = null;
      }

      function finish(verdict) {
        clearTimeout(timer);
        current.onmessage = current.onerror = null;
        const seconds = started ? (performance.now() - started) / 1000 : 0;
        status.textContent = "";
        runButton.disabled = false;
        verdictBox.replaceChildren(render(verdict, seconds, output));
      }

      // 文件按仓库里的样子摆：学习者的代码就是 workspace/NNN_slug.py，和本地 judge.py start 一样
      const { starter, ...job } = data;
      job.files = { ...data.files, [data.target]: code };
      // 随机种子每次现抽（和本地 judge.py 一样），判词里会写出它
      job.seed = 1 + (crypto.getRandomValues(new Uint32Array(1))[0] % 1000000000);
      current.postMessage(job);
    }

    // 把结论写成中文，措辞照着 judge.py 的 print_verdict
    function render(v, seconds, output) {
      const box = element("div", "admonition " + (LOOK[v.verdict] || LOOK.crash));
      const time = seconds < 1 ? seconds.toFixed(2) : seconds.toFixed(1);
      const title = {
        passed: `通过！${data.label}（${time} 秒）`,
        failed: `未通过：${data.label}`,
        timeout: `超时：${data.label} 在 ${limit} 秒内没有跑完，已被停止。`,
        syntax: `语法错误：第 ${v.line} 行`,
        crash: `运行时崩溃：${data.label}`,
        error: "没能运行评测",
      }[v.verdict] || `运行时崩溃：${data.label}`;
      box.append(element("p", "admonition-title", title));

      if (v.verdict === "passed") {
        box.append(element("p", "", v.message));
        const hint = element("p", "", "参考答案只在本地：");
        hint.append(element("code", "", `python practice/judge.py solution ${data.number}`), "，对照着看看写法有什么不同。");
        box.append(hint);
        return box;
      }
      if (v.verdict === "timeout") {
        box.append(element("p", "", "是不是有死循环？（比如 while 的条件永远成立，或者循环变量忘了更新）"));
      } else if (v.verdict === "syntax") {
        const gutter = " ".repeat(String(v.line).length);
        const caret = v.offset ? `\n${gutter} | ${" ".repeat(Math.max(0, v.offset - 1))}^` : "";
        if (v.text) box.append(pre(`${v.line} | ${v.text}${caret}`));
        box.append(element("p", "", `Python 说：${v.message}`));
      } else if (v.verdict === "error") {
        box.append(element("p", "", v.message));
        const hint = element("p", "", "刷新页面再试一次；本地评测 ");
        hint.append(element("code", "", "python practice/judge.py"), " 一直可用。");
        box.append(hint);
        return box;
      } else {
        box.append(pre(v.message));
        if (v.detail) box.append(pre(v.detail));
      }
      if (output.length && v.verdict !== "syntax") {
        box.append(element("p", "", "你的代码打印了（最后几行）："));
        box.append(pre(output.join("\n")));
      }
      box.append(element("p", "", "改好后再点「运行测试」；卡住了就展开上面的提示。"));
      return box;
    }
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text; // 一律 textContent：消息里的 < > 原样显示
    return node;
  }

  function pre(text) {
    const block = element("pre");
    block.append(element("code", "", text));
    return block;
  }
})();
