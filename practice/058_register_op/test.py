"""练习 058 的评测：在你的进程里调用两次 register_ops()，然后查 torch.ops.ex058.linear_int8 登记成了什么样
（schema、实现登记在哪个 dispatch key 上、有没有假实现），在随机的输入上和参考实现比较，在 meta 张量和
FakeTensor 上看假实现给出的形状、dtype、device 以及它做了哪些 aten 运算，最后用 torch.compile(fullgraph=True)
编译一个调用它的函数，看图里有没有这个算子、结果对不对。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_close, check_equal, check_tensor, main, require, seed, stage

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
GROUP = 32
SCHEMA = "ex058::linear_int8(Tensor x, Tensor q, Tensor d) -> Tensor"

# 算子登记在你的进程里，评测进程看不见 torch.ops.ex058：查它、调用它、编译它都得在你的进程里做。
# 这段驱动只做这些事、把看到的东西按值交回来（异常也写成字符串交回来）；对不对都在评测进程里判断。
STAGE = """
import torch
from torch.utils._python_dispatch import TorchDispatchMode

NAME = "ex058::linear_int8"


def packet():
    try:
        return getattr(torch.ops.ex058, "linear_int8")
    except (AttributeError, RuntimeError):
        return None


def describe():
    op = packet()
    if op is None:
        return {"exists": False}
    keys = ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd", "Meta")
    out = {"exists": True, "schemas": [str(getattr(op, name)._schema) for name in op.overloads()],
           "keys": {k: bool(torch._C._dispatch_has_kernel_for_dispatch_key(NAME, k)) for k in keys}}
    try:
        from torch._library.simple_registry import singleton
        out["fake"] = singleton.find(NAME).fake_impl.kernel is not None
    except Exception as e:  # torch 的内部接口变了
        out["fake"] = None
    return out


def call(x, q, d):
    return torch.ops.ex058.linear_int8(x, q, d)


def looks(t):
    if not isinstance(t, torch.Tensor):
        return {"error": f"返回的不是张量，是 {type(t).__name__}"}
    return {"shape": list(t.shape), "dtype": str(t.dtype), "device": str(t.device), "type": type(t).__name__}


def failure(e):
    return {"error": f"{type(e).__name__}: {e}"[:600]}


def on_meta(m, n, k):
    x = torch.empty(m, k, device="meta")
    q = torch.empty(n, k, dtype=torch.int8, device="meta")
    d = torch.empty(n, k // 32, device="meta")
    try:
        return looks(torch.ops.ex058.linear_int8(x, q, d))
    except Exception as e:
        return failure(e)


def on_fake(m, n, k):
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with FakeTensorMode():
            x = torch.empty(m, k)
            q = torch.empty(n, k, dtype=torch.int8)
            d = torch.empty(n, k // 32)
            return looks(torch.ops.ex058.linear_int8(x, q, d))
    except Exception as e:
        return failure(e)


class Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def fake_ops(m, n, k):
    # 直接调用登记的假实现（不经过分发），记下它做的每个 aten 运算
    from torch._library.simple_registry import singleton

    kernel = singleton.find(NAME).fake_impl.kernel
    x = torch.empty(m, k, device="meta")
    q = torch.empty(n, k, dtype=torch.int8, device="meta")
    d = torch.empty(n, k // 32, device="meta")
    log = Log()
    try:
        with log:
            kernel(x, q, d)
    except Exception as e:
        return {"names": log.names, **failure(e)}
    return {"names": log.names}


def compiled(cases):
    targets = []

    def backend(gm, example_inputs):
        targets.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward

    def f(x, q, d):
        return torch.ops.ex058.linear_int8(x, q, d) * 2 + 1

    g = torch.compile(f, fullgraph=True, backend=backend)
    outs = []
    try:
        for x, q, d in cases:
            outs.append(g(x, q, d))
    except Exception as e:
        return {"outs": outs, "targets": targets, **failure(e)}
    return {"outs": outs, "targets": targets}
"""

# 假实现里允许的 aten 运算：造张量、改形状。别的（乘、矩阵乘、类型转换……）都是在做真的计算
ALLOWED = {"empty", "empty_strided", "new_empty", "new_empty_strided", "empty_like", "zeros", "new_zeros",
           "zeros_like", "ones", "new_ones", "full", "new_full", "full_like", "fill_", "zero_", "view",
           "_unsafe_view", "reshape", "expand", "t", "transpose", "permute", "unsqueeze", "squeeze", "alias",
           "detach", "slice", "select", "as_strided", "sym_size", "sym_stride", "sym_numel", "lift_fresh"}


def reference(x: torch.Tensor, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    n, k = q.shape
    w = q.double().reshape(n, k // GROUP, GROUP) * d.double()[:, :, None]
    return (x.double() @ w.reshape(n, k).T).float()


def random_case(rng: random.Random, gen: torch.Generator):
    m, n, k = rng.randint(1, 8), rng.randint(1, 48), GROUP * rng.randint(1, 8)
    x = torch.randn(m, k, generator=gen) * rng.choice([0.1, 1.0, 10.0])
    q = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
    d = torch.rand(n, k // GROUP, generator=gen) * rng.choice([1e-3, 0.05, 1.0])
    d[torch.rand(n, k // GROUP, generator=gen) < 0.1] = 0.0  # 整组都是 0 的权重
    return x, q, d


def tolerance(x, q, d) -> float:
    n, k = q.shape
    w = q.double().abs().reshape(n, k // GROUP, GROUP) * d.double()[:, :, None]
    return 1e-5 * float((x.double().abs() @ w.reshape(n, k).T).max()) + 1e-6


def check_registration(info: dict) -> None:
    check(info["exists"], "register_ops() 之后 torch.ops.ex058 里找不到 linear_int8：算子没有登记上。\n"
          "  是不是只写了一个普通的 Python 函数？要用 torch.library 登记（define 或 custom_op）。\n"
          "  或者登记用的 torch.library.Library 对象是 register_ops 里的局部变量：函数返回后它被回收，"
          "它登记的东西也跟着撤销了——把它存进模块的全局变量")
    check_equal(info["schemas"], [SCHEMA], "torch.ops.ex058.linear_int8 的 schema（每个重载一个）",
                "题面规定了参数的名字、类型，而且没有 (a!) 之类的“会改写”标记")
    keys = info["keys"]
    check(not keys["CompositeImplicitAutograd"],
          "linear_int8 的实现登记在 CompositeImplicitAutograd 上：编译器会把它拆成一个个 aten 运算，"
          "你的内核根本进不了编译出的图（它也就不需要假实现）。登记在 CPU 上：lib.impl(名字, 函数, \"CPU\")")
    check(keys["CPU"] or keys["CompositeExplicitAutograd"],
          f"linear_int8 在 CPU 上没有实现（登记了的 dispatch key：{[k for k, v in keys.items() if v]}）。"
          "用 lib.impl(\"linear_int8\", linear_int8_cpu, \"CPU\") 登记")


def check_values(kit, rng: random.Random, gen: torch.Generator) -> None:
    for _ in range(25):
        x, q, d = random_case(rng, gen)
        if rng.random() < 0.2:
            x = torch.randn(x.shape[0], x.shape[1] + 32, generator=gen)[:, 16: 16 + x.shape[1]]  # 不连续的 x
        before = (x.clone(), q.clone(), d.clone())
        what = f"torch.ops.ex058.linear_int8（x [{x.shape[0]}, {x.shape[1]}]，q [{q.shape[0]}, {q.shape[1]}]）"
        got = kit.call(x, q, d)
        check_tensor(got, what, shape=(x.shape[0], q.shape[0]), dtype=torch.float32)
        check(all(torch.equal(a, b) for a, b in zip((x, q, d), before)), f"{what} 改动了传进来的张量")
        check_close(got, reference(x, q, d), what, atol=tolerance(x, q, d), rtol=1e-4)


def check_fake(kit, info: dict, rng: random.Random) -> None:
    check(info["fake"] is not False,
          "linear_int8 没有用 torch.library.register_fake 登记假实现：torch.compile 追踪时拿 FakeTensor 调用算子，"
          "没有假实现就不知道输出的形状，fullgraph=True 的编译当场失败")
    for _ in range(3):
        m, n = rng.randint(1, 8), rng.randint(1, 40)
        k = GROUP * rng.randint(1, 8)
        if n == k:
            n += 1  # N ≠ K：把 [M, K] 当成输出的假实现要露馅
        for where, seen in (("meta 张量", kit.on_meta(m, n, k)), ("FakeTensor", kit.on_fake(m, n, k))):
            what = f"在 {where} 上调用 linear_int8（x [{m}, {k}]，q [{n}, {k}]）"
            check("error" not in seen, f"{what} 出错了：{seen.get('error')}\n  假实现只用输入的形状造一个空的输出，"
                  "不要读数据（meta 张量、FakeTensor 都没有数据）")
            check_equal(seen["shape"], [m, n], f"{what} 得到的形状", "输出是 [x 的行数, q 的行数]")
            check_equal(seen["dtype"], "torch.float32", f"{what} 得到的 dtype")
            want_device = "meta" if where == "meta 张量" else "cpu"
            check_equal(seen["device"], want_device, f"{what} 得到的 device",
                        "输出要和 x 在同一个 device 上：x.new_empty(...)，或者 torch.empty(..., device=x.device)")
            if where == "FakeTensor":
                check_equal(seen["type"], "FakeTensor", f"{what} 得到的张量的类型")
        if info["fake"]:
            ran = kit.fake_ops(m, n, k)
            check("error" not in ran, f"直接在 meta 张量上调用你登记的假实现出错了：{ran.get('error')}")
            bad = [name for name in ran["names"] if name.split(".")[1] not in ALLOWED]
            check(not bad, f"假实现做了真正的运算：{bad}（它做的全部 aten 运算：{ran['names']}）。\n"
                  "  假实现只描述输出（形状、dtype、device），用 empty / new_empty 一类造一个空张量就够了；"
                  "真的内核（书里是 C++）要读数据，而追踪时的 FakeTensor 根本没有数据")


def check_compile(kit, rng: random.Random, gen: torch.Generator) -> None:
    x1, q, d = random_case(rng, gen)
    m2 = rng.choice([r for r in range(1, 9) if r != x1.shape[0]])
    x2 = torch.randn(m2, x1.shape[1], generator=gen)
    cases = [(x1, q, d), (x2, q, d)]
    seen = kit.compiled(cases)
    what = "torch.compile(fullgraph=True) 编译的 f(x, q, d) = torch.ops.ex058.linear_int8(x, q, d) * 2 + 1"
    check("error" not in seen, f"{what} 出错了：{seen.get('error')}")
    check(any("ex058.linear_int8" in t for t in seen["targets"]),
          f"{what}：编译出的图里没有 ex058.linear_int8 这个节点（图里的运算：{seen['targets']}）。"
          "算子要作为一个整体留在图里，编译器不该看到它里面")
    for i, ((x, q, d), got) in enumerate(zip(cases, seen["outs"])):
        want = reference(x, q, d) * 2 + 1
        check_close(got, want, f"{what}，第 {i + 1} 次调用（x 有 {x.shape[0]} 行）",
                    atol=2 * tolerance(x, q, d) + 1e-5, rtol=1e-4)


def run(mod: object) -> None:
    for name in ("register_ops", "linear_int8_cpu", "linear_int8_fake"):
        require(mod, name)
    mod.register_ops()
    try:
        mod.register_ops()
    except Exception as e:  # noqa: BLE001 - 学习者的代码抛出的任何异常都换成说明
        raise CheckFailed(f"第二次调用 register_ops() 出错了：{getattr(e, 'remote_type', type(e).__name__)}: {e}\n"
                          "  同一个命名空间不能 DEF 两次、同一个算子不能 register_fake 两次：登记过了就直接返回"
                          "（第 19 章的 load_kernels 用 _loaded 挡住第二次）") from None
    kit = stage(mod, STAGE)
    info = kit.describe()
    check_registration(info)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    check_values(kit, rng, gen)
    check_fake(kit, info, rng)
    check_compile(kit, rng, gen)


if __name__ == "__main__":
    main(run)
