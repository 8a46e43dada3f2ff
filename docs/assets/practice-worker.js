// 练习页的评测 worker：在后台线程里加载两个 Pyodide（编译成 WebAssembly 的 CPython）解释器，
// 用和本地 practice/judge.py 同一份 test.py、judgekit.py 评测学习者的代码（运行它们的是
// minibook/browser_judge.py，页面里嵌着它的源码）。
//
// 两个解释器，像本地的两个进程：一个里是 test.py（参考实现、随机种子、结论），另一个里只有
// isolation.py 和学习者的代码。两边各有各的内存和文件系统，只经下面的 bridge 交换字节，说的是本地
// 管道上的同一条协议。结论只从评测那个解释器出来，经这里事先存下的 postMessage 交给页面。
//
// 为什么放在 worker 里：学习者写出死循环时，卡住的是 worker 这条线程，页面照样能点；
// 主线程（practice-runner.js）到了时间限制就结束整个 worker —— 正在跑的 Python 没法从外面
// 打断，结束线程是最干脆的办法。一个 worker 只评测一次：评测完主线程就换一个新的。
"use strict";

// 全部写在一个函数里：学习者的代码能经 Pyodide 的 js 模块摸到 worker 的全局对象（还能用 eval 读
// 全局作用域里的变量），但摸不到这个函数里的局部变量——评测的解释器、bridge、postMessage 都在这里
(() => {
  const post = self.postMessage.bind(self);
  const parseJSON = JSON.parse;
  const stringify = JSON.stringify;

  // Pyodide 的运行时文件在网站自己的 assets/pyodide/ 里（mkdocs 构建时拷进去），不从 CDN 取。
  // 一创建 worker 就开始加载，页面那边可以趁学习者还在写代码时先把它热起来。
  const indexURL = new URL("pyodide/", self.location).href;
  importScripts(indexURL + "pyodide.js");
  const load = self.loadPyodide;
  const ready = Promise.all([load({ indexURL }), load({ indexURL })]).then(([judgePy, learnerPy]) => {
    // 学习者 print 的每一行立刻转给页面：即使后面超时被结束，已经打印的内容也看得到
    const stdout = { batched: (line) => post({ type: "stdout", line }) };
    learnerPy.setStdout(stdout);
    judgePy.setStdout(stdout);
    return { judgePy, learnerPy };
  });

  // 两个解释器之间的字节通道。各自的收件箱是一串 Uint8Array；一边要读而收件箱空着时调用 pump：
  // 让对面处理一条消息（浏览器里没有第二个线程，轮流说话就是互相调用）
  function makeBridge() {
    const toJudge = [];
    const toLearner = [];
    let learnerStep = null;
    let judgeStep = null;
    let learnerDead = false;
    const takeAll = (box) => {
      if (box.length === 0) return undefined; // 到 Python 里是 None
      const parts = box.splice(0, box.length);
      const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) {
        out.set(p, at);
        at += p.length;
      }
      return out;
    };
    const judgeSide = {
      put: (data) => void toLearner.push(new Uint8Array(data)),
      take: () => takeAll(toJudge),
      pending: () => toJudge.length > 0,
      pump: () => {
        if (learnerDead || learnerStep === null) return false;
        try {
          return learnerStep() === true;
        } catch {
          // 学习者那边抛到了 JS（比如 os._exit）：它“退出”了，评测那边当作进程没了
          learnerDead = true;
          return false;
        }
      },
      dead: () => learnerDead,
      serve: (step) => {
        judgeStep = step;
      },
    };
    const learnerSide = {
      put: (data) => void toJudge.push(new Uint8Array(data)),
      take: () => takeAll(toLearner),
      pending: () => toLearner.length > 0,
      pump: () => judgeStep !== null && judgeStep() === true,
      dead: () => false,
    };
    return { judgeSide, learnerSide, setLearnerStep: (step) => (learnerStep = step) };
  }

  // 学习者的代码和评测在同一个 JS 世界里：评测要经过的内置对象（JSON、字符串和字节的转换、
  // WebAssembly……）冻住，学习者的代码改不了它们，也就改不了评测那个解释器读进、交出的东西
  function lockdown() {
    const names = ["JSON", "Reflect", "Math", "Object", "Function", "Array", "String", "Number",
      "ArrayBuffer", "DataView", "Uint8Array", "Int8Array", "Uint16Array", "Int16Array", "Uint32Array",
      "Int32Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array", "TextDecoder",
      "TextEncoder", "WebAssembly", "Promise", "Map", "Set", "WeakMap", "Date", "performance", "crypto"];
    const freeze = (value) => {
      if (value === null || (typeof value !== "object" && typeof value !== "function")) return;
      Object.freeze(value);
      if (typeof value === "function" && value.prototype) Object.freeze(value.prototype);
    };
    for (const name of names) {
      const value = self[name];
      freeze(value);
      if (value && typeof value === "object") {
        // WebAssembly.Memory、WebAssembly.Instance 这些（不可枚举，所以按全部的键来）
        for (const key of Reflect.ownKeys(value)) freeze(Object.getOwnPropertyDescriptor(value, key).value);
      }
      // 全局的名字也钉住，换不成学习者自己的对象（performance 这类是 getter，冻住对象本身就够了）
      const slot = Object.getOwnPropertyDescriptor(self, name);
      if (slot && "value" in slot) Object.defineProperty(self, name, { writable: false, configurable: false });
    }
    const typedArray = Object.getPrototypeOf(Uint8Array); // 各种 TypedArray 共同的父类：set、subarray 在它上面
    freeze(typedArray);
    freeze(Object.getPrototypeOf(crypto));
    freeze(Object.getPrototypeOf(performance));
    // 学习者的代码不能自己给页面发消息（比如一个伪造的“通过”）：postMessage 只留在上面存下的 post 里
    for (let o = self; o !== null; o = Object.getPrototypeOf(o)) {
      if (Object.prototype.hasOwnProperty.call(o, "postMessage")) delete o.postMessage;
    }
  }

  let used = false;
  self.addEventListener("message", async (event) => {
    // 一个 worker 只评测一次；学习者的代码用 dispatchEvent 造出来的消息 isTrusted 是 false
    if (used || !event.isTrusted) return;
    used = true;
    const job = event.data;
    try {
      const { judgePy, learnerPy } = await ready;
      const bridge = makeBridge();
      judgePy.registerJsModule("judge_bridge", bridge.judgeSide);
      learnerPy.registerJsModule("judge_bridge", bridge.learnerSide);
      // 学习者的解释器里只放 isolation.py：像本地子进程的 `python -c <isolation.py 的源码>`
      const boot = learnerPy.toPy({ source: job.files["isolation.py"] });
      learnerPy.runPython(
        "import sys, types\n" +
          "isolation = types.ModuleType('isolation')\n" +
          "isolation.__file__ = 'isolation.py'\n" +
          "sys.modules['isolation'] = isolation\n" +
          "exec(compile(source, 'isolation.py', 'exec'), isolation.__dict__)\n",
        { globals: boot },
      );
      bridge.setLearnerStep(boot.get("isolation").browser_learner(bridge.learnerSide));
      // 像导入一个模块那样执行 browser_judge.py：放在它自己的命名空间里，不碰 Pyodide 的全局变量
      const namespace = judgePy.toPy({ __name__: "browser_judge" });
      judgePy.runPython(job.harness, { globals: namespace, filename: "browser_judge.py" });
      const judge = namespace.get("judge_in_browser");
      lockdown();
      // 从这一刻起计时：加载 Pyodide 的那几秒不算进学习者的时间限制
      post({ type: "started" });
      const { harness, ...rest } = job;
      // 写文件、设置 JUDGE_TARGET / JUDGE_RESULT、运行 test.py、读回 judgekit 写的 JSON 结论
      const verdict = parseJSON(judge(stringify(rest)));
      post({ type: "verdict", verdict });
    } catch (err) {
      // 走到这里的是运行环境的问题（Pyodide 没加载成功之类），不是学习者代码的问题：
      // 学习者代码里的任何错误都已经被 judgekit 变成了结论
      post({ type: "error", message: String(err && err.message ? err.message : err) });
    }
  });
})();
