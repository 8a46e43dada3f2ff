// 练习页的评测 worker：在后台线程里加载 Pyodide（编译成 WebAssembly 的 CPython），
// 用和本地 practice/judge.py 同一份 test.py、judgekit.py 评测学习者的代码（运行它们的是
// minibook/browser_judge.py，页面里嵌着它的源码）。
//
// 为什么放在 worker 里：学习者写出死循环时，卡住的是 worker 这条线程，页面照样能点；
// 主线程（practice-runner.js）到了时间限制就结束整个 worker —— 正在跑的 Python 没法从外面
// 打断，结束线程是最干脆的办法。一个 worker 只评测一次：评测完主线程就换一个新的，
// 学习者的代码在这个解释器里改掉的东西（打过补丁的标准库模块之类）带不到下一次。
"use strict";

// Pyodide 的运行时文件在网站自己的 assets/pyodide/ 里（mkdocs 构建时拷进去），不从 CDN 取。
// 一创建 worker 就开始加载，页面那边可以趁学习者还在写代码时先把它热起来。
const indexURL = new URL("pyodide/", self.location).href;
importScripts(indexURL + "pyodide.js");
const ready = loadPyodide({ indexURL }).then((pyodide) => {
  // 学习者 print 的每一行立刻转给页面：即使后面超时被结束，已经打印的内容也看得到
  pyodide.setStdout({ batched: (line) => postMessage({ type: "stdout", line }) });
  return pyodide;
});

let judge = null; // Python 里的 judge_in_browser 函数：页面嵌的 minibook/browser_judge.py 定义它

self.onmessage = async ({ data: job }) => {
  try {
    const pyodide = await ready;
    if (judge === null) {
      // 像导入一个模块那样执行 browser_judge.py：放在它自己的命名空间里，不碰 Pyodide 的全局变量
      const namespace = pyodide.toPy({ __name__: "browser_judge" });
      pyodide.runPython(job.harness, { globals: namespace, filename: "browser_judge.py" });
      judge = namespace.get("judge_in_browser");
    }
    // 从这一刻起计时：加载 Pyodide 的那几秒不算进学习者的时间限制
    postMessage({ type: "started" });
    const { harness, ...rest } = job;
    // 写文件、设置 JUDGE_TARGET / JUDGE_RESULT、运行 test.py、读回 judgekit 写的 JSON 结论
    const verdict = JSON.parse(judge(JSON.stringify(rest)));
    postMessage({ type: "verdict", verdict });
  } catch (err) {
    // 走到这里的是运行环境的问题（Pyodide 没加载成功之类），不是学习者代码的问题：
    // 学习者代码里的任何错误都已经被 judgekit 变成了结论
    postMessage({ type: "error", message: String(err && err.message ? err.message : err) });
  }
};
