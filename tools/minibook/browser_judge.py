"""在浏览器里评测一道练习：网站练习页的 Web Worker 在 Pyodide（编译成 WebAssembly 的 CPython）里运行这个文件。

它做的事和 practice/judge.py（minibook.judging.run_test）一样：把题目的 test.py 当作 __main__ 运行，
环境变量 JUDGE_TARGET 指向学习者的代码、JUDGE_RESULT 指向结论文件，结论由 practice/judgekit.py
判定并写成 JSON，这里再读回来。区别只有两点：

- 没有子进程（浏览器里起不了）：worker 里另起一个 Pyodide 解释器当“子进程”，学习者的代码在那边，
  judgekit 经 worker 装进来的 judge_bridge 模块和它说话（协议和本地的管道一样，见 isolation.BridgePeer）；
  网页每次评测都用一个新的 worker；超时由网页结束整个 worker 来处理；
- 文件由网页交过来：job = {"root": 目录, "files": {相对路径: 内容}, "test": test.py 的相对路径,
  "target": 学习者代码的相对路径}。文件按仓库里的样子摆（root/judgekit.py、root/004_batch_positions/test.py、
  root/workspace/004_batch_positions.py），于是 test.py 开头那句 sys.path.insert 照样能找到 judgekit。

只用标准库。网页怎么用它：minibook.practice 生成页面时把这个文件的源码嵌进页面，
docs/assets/practice-worker.js 在 Pyodide 里执行它，再调用 judge_in_browser(job_json)。
在普通 CPython 里也能跑（tests/test_browser_practice.py 用它和 judge.py 对照）::

    python -m minibook.browser_judge < job.json
"""

import contextlib
import io
import json
import os
import runpy
import shutil
import sys
import tempfile
import traceback


def judge_in_browser(job_json: str) -> str:
    """评测一次，返回结论的 JSON（和 judgekit 写出的一样：verdict、message……）。"""
    job = json.loads(job_json)
    root = job["root"]
    for rel, text in job["files"].items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    test, target = os.path.join(root, job["test"]), os.path.join(root, job["target"])
    work = tempfile.mkdtemp(prefix="judge-")  # 和 judge.py 一样：在临时目录里跑
    result_path = os.path.join(work, "result.json")
    saved_env, saved_path, saved_modules = dict(os.environ), list(sys.path), set(sys.modules)
    saved_argv, saved_cwd = list(sys.argv), os.getcwd()
    os.environ.update(JUDGE_TARGET=target, JUDGE_RESULT=result_path, PYTHONDONTWRITEBYTECODE="1")
    if job.get("seed"):  # 网页每次评测抽一个随机种子（和本地 judge.py 一样），判词里写着它
        os.environ["JUDGE_SEED"] = str(int(job["seed"]))
    sys.argv = [test]
    sys.path.insert(0, os.path.dirname(test))  # 像 `python test.py` 那样
    os.chdir(work)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            runpy.run_path(test, run_name="__main__")
    except SystemExit:  # judgekit.main 最后总是 sys.exit(0 或 1)
        pass
    except BaseException:  # test.py 自己没能跑起来
        stderr.write(traceback.format_exc())
    finally:
        # 同一个 worker 还要评测下一次：把环境恢复原样，并忘掉这次从题目文件导入的模块
        # （judgekit、学习者的代码）；标准库模块留着，下次不用重新导入
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:], sys.argv[:] = saved_path, saved_argv
        for name in set(sys.modules) - saved_modules:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(root):
                del sys.modules[name]
    try:
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError):
        # 和 judge.py 一样：没有 JSON 结论就是崩溃，附上 stderr 的最后几行
        lines = stderr.getvalue().rstrip().splitlines()
        result = {"verdict": "crash", "message": "评测没有给出结论。你的代码是不是调用了 os._exit？",
                  "detail": "\n".join(lines[-15:])}
    finally:
        shutil.rmtree(work, ignore_errors=True)  # 在 CPython 里跑（测试里）时不留下临时目录
    return json.dumps(result, ensure_ascii=False)


if __name__ == "__main__":
    sys.stdout.write(judge_in_browser(sys.stdin.read()) + "\n")
