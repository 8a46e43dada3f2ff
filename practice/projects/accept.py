#!/usr/bin/env python3
"""手写 mini-sglang · 大作业的验收脚本。

    python practice/projects/accept.py                 列出大作业
    python practice/projects/accept.py json            在最后一章的树（build/ch21）里验收“约束解码”
    python practice/projects/accept.py retract --tree 目录   验收你放在别处的树

你的引擎在子进程里跑（工作目录和 PYTHONPATH 都是那棵树），只把它生成的 token 和它交给
模型的每一批记下来交回；对不对由这个进程判：参照答案由 Hugging Face 的模型现算，你的代码够不着。
每次验收的随机输入都不一样，判词里写着这次的 ACCEPT_SEED，设置它再跑就是同样的输入。
"""

from __future__ import annotations

import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from common import Fail  # noqa: E402

try:
    from minibook import cli
except ModuleNotFoundError:  # 还没装书的辅助包：说清楚怎么办，而不是一段 traceback
    print("错误：找不到书的辅助包 minibook。在仓库根目录运行 pip install -e . 再试。", file=sys.stderr)
    sys.exit(2)

# 名字 → (模块, 一句话)。模块里有 produce(seed)（子进程里、用你的引擎）和 judge(result, seed)（这里）
PROJECTS = {
    "json": ("json_decoding", "约束解码：每一步只允许合 JSON schema 的 token"),
    "retract": ("retract", "抢占：乐观地接纳请求，页不够时把在跑的请求退回队列，什么都不丢"),
    "lpm": ("lpm", "最长前缀优先：排队的请求按命中前缀缓存的长度排序"),
}
DEFAULT_TIMEOUT = 900  # 秒；三个项目的参考实现在 2 核的机器上都在两分钟以内


def default_tree() -> Path:
    from minibook import chapters

    return chapters.written_chapters()[-1].build_dir


def main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(description="大作业的验收（在 CPU 上跑）")
    parser.add_argument("project", nargs="?", choices=sorted(PROJECTS), help="要验收的项目")
    parser.add_argument("--tree", type=Path, default=None, help="你的源码树（默认最后一章的 build/chNN）")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="子进程最多跑几秒")
    args = parser.parse_args(argv)
    if args.project is None:
        print("大作业（验收：python practice/projects/accept.py <名字>）：")
        for name, (_, what) in PROJECTS.items():
            print(f"  {name:8s} {what}")
        return 0
    tree = (args.tree or default_tree()).resolve()
    if not (tree / "minisgl" / "__init__.py").is_file():
        return cli.fail(f"{tree} 里没有 minisgl 包。先搭一棵树：python tools/steps.py build 21，"
                        f"在 build/ch21 里动手，或用 --tree 指向你自己的树。")
    seed = int(os.environ.get("ACCEPT_SEED", random.randrange(10**6)))
    module_name, what = PROJECTS[args.project]
    module = importlib.import_module(module_name)
    print(f"验收 {args.project}：{what}")
    print(f"树：{tree}    ACCEPT_SEED={seed}")
    try:
        result = run_child(module_name, tree, seed, args.timeout)
        for line in module.judge(result, seed):
            print(f"  ✓ {line}")
    except Fail as e:
        print(f"\n未通过：{e}")
        print(f"（同样的输入再跑一次：ACCEPT_SEED={seed} python practice/projects/accept.py {args.project}）")
        return 1
    print(f"\n通过：{args.project} 的每一项检查都对上了。")
    return 0


def run_child(module_name: str, tree: Path, seed: int, timeout: int) -> dict:
    """在子进程里用那棵树的 minisgl 跑 produce，读回它写的 JSON。出错、超时都变成 Fail。"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(HERE)]))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(HERE / "common.py"), module_name, str(seed), str(out)]
        started = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail(f"你的引擎 {timeout} 秒还没跑完（死循环？请求一直没结束？）。"
                       f"--timeout 可以放宽") from None
        print(f"  （你的引擎跑了 {time.monotonic() - started:.0f} 秒）")
        if proc.returncode == 3:  # 缺接口：子进程已经写好了一句话
            raise Fail(proc.stderr.strip().splitlines()[-1])
        text = out.read_text() if out.is_file() else ""
        if proc.returncode != 0 or not text:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise Fail(f"你的引擎在子进程里出错了或者提前退出了（退出码 {proc.returncode}，"
                       f"没有交回结果），最后几行：\n{tail}")
        return json.loads(text)


if __name__ == "__main__":
    cli.run(main)
