"""浏览器里的 Python：网站上的练习页用 Pyodide（编译成 WebAssembly 的 CPython）运行评测。

- ensure_pyodide()  保证缓存里有 Pyodide 的运行时文件，返回目录；拿不到就返回 None（打一行中文说明）。
                    第一次用 `npm pack pyodide@0.27.7` 从 npm 仓库取 tarball（约 6 MB），核对 sha512，
                    只取出纯 Python 代码需要的几个文件，放进 cache_dir()/pyodide-0.27.7/。
                    和模型一样：先写进同级的临时目录，写完一步改名，缓存里不会有写了一半的目录。
- find_pyodide()    只看缓存，不联网。
- copy_runtime()    把运行时文件拷进构建好的网站（mkdocs 的 hook 在 on_post_build 里调用）。

命令行：python -m minibook.pyodide fetch
没有网络时，可以先在别处 `npm pack pyodide@0.27.7`，再设 MINISGL_PYODIDE_TARBALL=那个 .tgz 的路径。
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

from minibook import cli
from minibook.models import cache_dir, is_prepared, prepare_folder

VERSION = "0.27.7"
PACKAGE = f"pyodide@{VERSION}"
# `npm view pyodide@0.27.7 dist.integrity` 的结果，记在这里：下载到的 tarball 必须和它一致
INTEGRITY = "sha512-RUSVJlhQdfWfgO9hVHCiXoG+nVZQRS5D9FzgpLJ/VcgGBLSAKoPL8kTiOikxbHQm1kRISeWUBdulEgO26qpSRA=="
# 只跑纯 Python 代码需要的文件（不要 .map、.d.ts、console.html）；package.json 里写着许可证 MPL-2.0
RUNTIME_FILES = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json", "package.json")
RECIPE = f"{PACKAGE} {INTEGRITY}"
FETCH_HINT = "python -m minibook.pyodide fetch"

_failure: str | None = None  # 本进程里已经失败过一次：不再反复调用 npm（mkdocs serve 每次重建都会问）


class PyodideFetchError(RuntimeError):
    """取不到 Pyodide。消息是给读者看的中文说明。"""


def target_dir() -> Path:
    return cache_dir() / f"pyodide-{VERSION}"


def find_pyodide() -> Path | None:
    """缓存里已经准备好的运行时目录；没有就是 None。不联网。"""
    folder = target_dir()
    if is_prepared(folder, RECIPE) and all((folder / name).is_file() for name in RUNTIME_FILES):
        return folder
    return None


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def ensure_pyodide(log: Callable[[str], None] = _stderr) -> Path | None:
    """准备好的运行时目录；取不到时用 log 报一行中文原因，返回 None（网站照样能构建）。"""
    global _failure
    found = find_pyodide()
    if found is not None or _failure is not None:
        if found is None:
            log(_failure)
        return found
    try:
        return fetch()
    except PyodideFetchError as e:
        _failure = (f"浏览器里运行练习暂不可用：{e}\n"
                    f"  准备好之后运行 {FETCH_HINT} 再重新构建网站；本地评测 python practice/judge.py 不受影响。")
        log(_failure)
        return None


def fetch() -> Path:
    """取 tarball、校验、解出运行时文件，原子地放进缓存。失败抛 PyodideFetchError。"""
    return prepare_folder(target_dir(), RECIPE, _build)


def _build(staging: Path) -> None:
    tarball = _tarball(staging)
    _check_integrity(tarball)
    _extract(tarball, staging)
    tarball.unlink()


def _tarball(dest: Path) -> Path:
    """读者给了 tarball（$MINISGL_PYODIDE_TARBALL）就用它，否则 `npm pack` 从 npm 仓库取。"""
    given = os.environ.get("MINISGL_PYODIDE_TARBALL")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise PyodideFetchError(f"环境变量 MINISGL_PYODIDE_TARBALL 指向的文件不存在：{path}")
        return Path(shutil.copyfile(path, dest / "pyodide.tgz"))
    npm = shutil.which("npm")
    if npm is None:
        raise PyodideFetchError(f"没有找到 npm（Node.js 自带），没法从 npm 仓库取 {PACKAGE}")
    # 重试和超时设得短一些：仓库连不上时，几十秒内就给出结论，而不是默认的好几分钟
    command = [npm, "pack", PACKAGE, "--json", "--pack-destination", str(dest), "--loglevel=error",
               "--fetch-retries=1", "--fetch-timeout=30000"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise PyodideFetchError(f"npm pack {PACKAGE} 五分钟还没下完，放弃了") from None
    tarballs = sorted(dest.glob("pyodide-*.tgz"))
    if result.returncode != 0 or len(tarballs) != 1:
        tail = " / ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise PyodideFetchError(f"npm pack {PACKAGE} 失败（npm 仓库连不上？）：{tail}")
    return tarballs[0]


def _check_integrity(tarball: Path) -> None:
    digest = hashlib.sha512(tarball.read_bytes()).digest()
    actual = "sha512-" + base64.b64encode(digest).decode()
    if actual != INTEGRITY:
        raise PyodideFetchError(f"{tarball.name} 的校验和不对（应该是 {INTEGRITY}，实际是 {actual}），不能用")


def _extract(tarball: Path, out: Path) -> None:
    """只按名字取出需要的文件（npm 的 tarball 里都在 package/ 下），不整包解开。"""
    with tarfile.open(tarball, "r:gz") as tar:
        for name in RUNTIME_FILES:
            try:
                member = tar.getmember(f"package/{name}")
                source = tar.extractfile(member)
            except KeyError:
                source = None
            if source is None:
                raise PyodideFetchError(f"{tarball.name} 里没有 package/{name}")
            with source, open(out / name, "wb") as f:
                shutil.copyfileobj(source, f)


def copy_runtime(source: Path, dest: Path) -> int:
    """把运行时文件拷到网站里的 dest/（已经一样的文件不重拷，mkdocs serve 重建时快）。返回字节数。"""
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in RUNTIME_FILES:
        src, dst = source / name, dest / name
        size = src.stat().st_size
        if not (dst.is_file() and dst.stat().st_size == size and dst.stat().st_mtime >= src.stat().st_mtime):
            shutil.copy2(src, dst)
        total += size
    return total


def _main(argv: list[str] | None = None) -> int:
    parser = cli.ArgumentParser(prog="python -m minibook.pyodide",
                                description="网站练习页在浏览器里评测要用的 Pyodide：取一次，放进模型缓存旁边。")
    sub = parser.add_subparsers(title="命令", dest="command", metavar="命令", required=True)
    sub.add_parser("fetch", help=f"把 Pyodide {VERSION} 取进 {target_dir()}")
    parser.parse_args(argv)
    try:
        folder = fetch()
    except PyodideFetchError as e:
        print(f"错误：取 Pyodide 失败：{e}", file=sys.stderr)
        print("本地评测 python practice/judge.py 不需要它；网站上的练习页会改为显示本地评测的命令。",
              file=sys.stderr)
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    cli.run(_main)
