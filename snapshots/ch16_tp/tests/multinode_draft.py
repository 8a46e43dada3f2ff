# ---------------------------------------------------------------------------- 多机：两个网络命名空间
#
# 草稿：并入 tests/test_ch16_tp.py 时，把下面的 import 挪到文件开头（去掉重复的）。

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibook.hf import hf_greedy
from minibook.models import tiny_qwen3
from minisgl.utils.hf import load_tokenizer
from test_ch15_server import Server, descendants, stop_server, wait_until_gone

TREE = Path(__file__).resolve().parents[1]  # 这一章的树：`python -m minisgl` 在这里找到 minisgl
MULTINODE_DEADLINE = 180.0  # 秒；只是防止挂死，不是计时断言
DIST_PORT, HTTP_PORT = 29500, 30000  # 命名空间是新建的，里面的端口都空着

# 在 0 号"机器"的命名空间里跑的客户端：官方 openai 包，非流式和流式各问一次，打印一行 JSON
_CLIENT = """
import json, sys
from openai import OpenAI
url, model, prompt = sys.argv[1:4]
client = OpenAI(base_url=url, api_key="none", timeout=60, max_retries=0)
out = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0)
chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0,
                                        stream=True))
print(json.dumps({"text": out.choices[0].text, "finish": out.choices[0].finish_reason,
                  "stream_text": "".join(c.choices[0].text for c in chunks if c.choices),
                  "stream_finish": [c.choices[0].finish_reason for c in chunks if c.choices][-1]}))
"""


def _ip(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts():
    """两台"机器"：两个网络命名空间，一对 veth 连起来（10.231.x.1 ↔ 10.231.x.2），各自的 lo 也打开。

    只动自己建的命名空间：veth 直接建在里面，删掉命名空间时它也跟着没了。
    返回 (ns0, ns1, ip0, ip1)。
    """
    if os.geteuid() != 0:
        pytest.skip("建网络命名空间要 root 权限")
    if shutil.which("ip") is None:
        pytest.skip("没有 ip 命令（iproute2），建不了网络命名空间")
    tag = f"{os.getpid()}{time.monotonic_ns() % 10_000}"
    ns = (f"minisgl{tag}a", f"minisgl{tag}b")
    subnet = f"10.231.{os.getpid() % 250 + 1}"
    ips = (f"{subnet}.1", f"{subnet}.2")
    made: list[str] = []
    try:
        for name in ns:
            r = _ip("netns", "add", name)
            if r.returncode != 0:
                pytest.skip(f"ip netns add 失败（{r.stderr.strip()}），建不了网络命名空间")
            made.append(name)
        steps = [("link", "add", "name", "veth0", "netns", ns[0], "type", "veth",
                  "peer", "name", "veth1", "netns", ns[1])]
        for i in (0, 1):
            steps += [("-n", ns[i], "addr", "add", f"{ips[i]}/24", "dev", f"veth{i}"),
                      ("-n", ns[i], "link", "set", f"veth{i}", "up"),
                      ("-n", ns[i], "link", "set", "lo", "up")]
        steps += [("netns", "exec", ns[0], "true")]  # ip netns exec 要重新挂 /sys：容器里可能不让
        for step in steps:
            r = _ip(*step)
            if r.returncode != 0:
                pytest.skip(f"ip {' '.join(step)} 失败（{r.stderr.strip()}），搭不起两台机器的网络")
        yield ns[0], ns[1], ips[0], ips[1]
    finally:
        for name in made:
            _ip("netns", "delete", name)


def _start_node(ns: str, node_rank: int, ip0: str, log_path: Path) -> Server:
    """在命名空间 ns 里起一台"机器"的 `python -m minisgl`（ip netns exec 原地 exec，pid 就是启动器）。"""
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "minisgl",
           "--model-path", str(tiny_qwen3()), "--tp-size", "2", "--nnodes", "2",
           "--node-rank", str(node_rank), "--dist-init-addr", f"{ip0}:{DIST_PORT}",
           "--host", ip0, "--port", str(HTTP_PORT), "--num-pages", "512"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("GLOO_SOCKET_IFNAME", None)  # 外面设的网卡名在命名空间里没有：让引擎自己挑
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=TREE)
    return Server(proc, HTTP_PORT, log_path)


def _logs(*nodes: Server) -> str:
    return "\n".join(f"---- {n.log_path.name}（退出码 {n.proc.poll()}）：\n{n.log()[-3000:]}"
                     for n in nodes)


def test_tp2_across_two_network_namespaces(two_hosts, tmp_path):
    """TP=2，一台"机器"一个 rank：openai 客户端从 0 号机器拿到的回答和 HF 贪心一样；
    0 号机器停掉后，1 号机器的启动器以退出码 1 退出，说明原因，一个进程也不留。"""
    ns0, ns1, ip0, _ = two_hosts
    model = tiny_qwen3()
    node0 = _start_node(ns0, 0, ip0, tmp_path / "node0.log")
    node1 = _start_node(ns1, 1, ip0, tmp_path / "node1.log")
    family: set[int] = set()
    try:
        # 两台机器加载模型的时候，在这边算 HF 的参照（和服务器一样分词：补全接口原样 encode）
        prompt = "The capital of France is"
        tokenizer = load_tokenizer(model)
        ref = hf_greedy(model, tokenizer.encode(prompt), 8)
        finish = "length"
        if tokenizer.eos_token_id in ref:  # EOS 不是文字的一部分
            ref, finish = ref[:ref.index(tokenizer.eos_token_id)], "stop"
        expected = tokenizer.decode(ref, skip_special_tokens=True)  # 服务器默认也跳过特殊 token

        deadline = time.monotonic() + MULTINODE_DEADLINE
        while "API server 在" not in node0.log():
            if node0.proc.poll() is not None or node1.proc.poll() is not None:
                pytest.fail(f"有一台机器启动时退出了：\n{_logs(node0, node1)}")
            if time.monotonic() > deadline:
                pytest.fail(f"{MULTINODE_DEADLINE:.0f} 秒内没有就绪：\n{_logs(node0, node1)}")
            time.sleep(0.2)
        family = {node0.proc.pid, node1.proc.pid} | descendants(node0.proc.pid) | descendants(node1.proc.pid)

        client = subprocess.run(
            ["ip", "netns", "exec", ns0, sys.executable, "-c", _CLIENT,
             f"http://{ip0}:{HTTP_PORT}/v1", model.name, prompt],
            capture_output=True, text=True, timeout=MULTINODE_DEADLINE)
        assert client.returncode == 0, f"{client.stderr[-3000:]}\n{_logs(node0, node1)}"
        got = json.loads(client.stdout)
        assert (got["text"], got["finish"]) == (expected, finish)
        assert (got["stream_text"], got["stream_finish"]) == (expected, finish)

        # 停掉 0 号机器：rank 0 和它开的会合端口一起没了，1 号机器发现后自己退出
        node0.proc.send_signal(signal.SIGTERM)
        assert node0.proc.wait(timeout=60) == 128 + signal.SIGTERM, _logs(node0, node1)
        try:
            code = node1.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"0 号机器停了 60 秒，1 号机器还没退出：\n{_logs(node0, node1)}")
        assert code == 1, _logs(node0, node1)
        assert f"0 号机器的 rank 0（{ip0}:{DIST_PORT}）连不上了" in node1.log(), _logs(node1)
        assert wait_until_gone(family) == [], _logs(node0, node1)
    finally:
        for node in (node0, node1):
            stop_server(node, family)
