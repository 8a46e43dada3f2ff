"""练习 010 的评测：各种到达顺序下，交出的内容、交出的时机、缓冲有没有及时释放、缺块时的报错。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import re
import sys
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_type, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
RETAIN_LIMIT = 6  # 允许你的代码里几个临时变量还攥着已经交出去的值；一直不删的缓冲会远远超过它

MERGED = {
    "q_proj": "qkv_proj",
    "k_proj": "qkv_proj",
    "v_proj": "qkv_proj",
    "gate_proj": "gate_up_proj",
    "up_proj": "gate_up_proj",
}
ORDER = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
ROWS = {"q_proj": 2, "k_proj": 1, "v_proj": 1, "gate_proj": 2, "up_proj": 2}
ABBR = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "gate_proj": "gate", "up_proj": "up"}


class Rows(list):
    """一个值：代表张量各行的 list。它能被弱引用，测试借此数出你的代码还攥着多少个值。"""


def label(name: str) -> str:
    parts = name.split(".")
    module, param = parts[-2], parts[-1]
    where = ""
    layer = re.search(r"layers\.(\d+)\.", name)
    if layer:
        where += f"L{layer.group(1)}."
    expert = re.search(r"experts\.(\d+)\.", name)
    if expert:
        where += f"E{expert.group(1)}."
    tail = "" if param == "weight" else ".b" if param == "bias" else f".{param}"
    return where + ABBR.get(module, module) + tail


def make_rows(name: str) -> list[str]:
    module = name.split(".")[-2]
    return [f"{label(name)}[{r}]" for r in range(ROWS.get(module, 1))]


# ---------------------------------------------------------------------------
# 参考实现：不流式。先看完整个名字列表，算出每一组最后一块的下标——合并结果就在那里交出；
# 普通权重在它自己的下标交出。
# ---------------------------------------------------------------------------


def group_of(name: str):
    parts = name.split(".")
    module, param = parts[-2], parts[-1]
    if module in MERGED and param in ("weight", "bias"):
        return (".".join(parts[:-2]), MERGED[module], param), module
    return None, None


def join(prefix: str, module: str, param: str) -> str:
    return ".".join(p for p in (prefix, module, param) if p)


def ref_plan(names: list[str]):
    """返回 ([(交出的名字, 交出的值, 交出时已读的条目数, 覆盖的输入下标)], 缺少的完整名字)。"""
    members: dict[tuple, dict[str, int]] = {}
    for i, name in enumerate(names):
        key, module = group_of(name)
        if key is not None:
            members.setdefault(key, {})[module] = i
    last = {}
    missing = []
    for key, got in members.items():
        prefix, merged, param = key
        need = ORDER[merged]
        if all(m in got for m in need):
            last[max(got.values())] = key
        else:
            missing += [join(prefix, m, param) for m in need if m not in got]
    plan = []
    for i, name in enumerate(names):
        key, _ = group_of(name)
        if key is None:
            plan.append((name, make_rows(name), i + 1, [i]))
        elif i in last:
            key = last[i]
            prefix, merged, param = key
            rows = [row for m in ORDER[merged] for row in make_rows(join(prefix, m, param))]
            plan.append((join(prefix, merged, param), rows, i + 1, sorted(members[key].values())))
    return plan, missing


# ---------------------------------------------------------------------------
# 会记账的输入
# ---------------------------------------------------------------------------


class Source:
    """按给定顺序产出 (name, Rows)；每次被读时数一数已经交出去的值还有几个活着。"""

    def __init__(self, names: list[str], title: str):
        self.names = names
        self.title = title
        self.pulled = 0
        self.refs: list[weakref.ref] = []
        self.released: set[int] = set()

    def __iter__(self):
        return self

    def __next__(self):
        alive = [i for i in sorted(self.released) if self.refs[i]() is not None]
        if len(alive) > RETAIN_LIMIT:
            sample = "、".join(self.names[i] for i in alive[:4])
            raise CheckFailed(
                f"[{self.title}] 读第 {self.pulled + 1} 个条目时，已经交出去的值里还有 {len(alive)} 个"
                f"被你的代码引用着（比如 {sample} ……）。\n"
                "  一组凑齐、交出之后，要把它从缓冲里删掉（del / pop）；普通权重也不要另外存起来。"
                "流式加载就是为了不把整个模型攒在内存里。"
            )
        if self.pulled == len(self.names):
            raise StopIteration
        name = self.names[self.pulled]
        value = Rows(make_rows(name))
        self.refs.append(weakref.ref(value))
        self.pulled += 1
        return name, value


def describe_order(names: list[str], limit: int = 14) -> str:
    shown = [n for n in names[:limit]]
    more = f" …（共 {len(names)} 个）" if len(names) > limit else ""
    return "[" + ", ".join(shown) + "]" + more


def run_stream(merge_stream, names: list[str], title: str) -> None:
    plan, missing = ref_plan(names)
    source = Source(names, title)
    context = f"\n  场景：{title}\n  输入顺序：{describe_order(names)}"
    stream = merge_stream(source)
    check(
        hasattr(stream, "__next__"),
        f"merge_stream(items) 应该返回一个生成器（函数体里用 yield），你返回的是 {type(stream).__name__}",
    )
    received = 0
    error = None
    while True:
        try:
            item = next(stream)
        except StopIteration:
            break
        except ValueError as e:
            error = e
            break
        what = f"merge_stream 交出的第 {received + 1} 个结果"
        check(
            isinstance(item, tuple) and len(item) == 2,
            f"{what} 应该是 (name, value) 二元组，你的是 {short(item)}{context}",
        )
        name, value = item
        del item
        check_type(name, str, f"{what} 的 name")
        check_type(value, list, f"{what}（{name}）的 value")
        if received >= len(plan):
            raise CheckFailed(
                f"{what} 是多出来的：应该只有 {len(plan)} 个结果，你又交出了 {name}{context}"
            )
        want_name, want_value, when, covers = plan[received]
        if name != want_name:
            hint = ""
            key, _ = group_of(name)
            want_key, _ = group_of(want_name)
            if key is not None:
                hint = (
                    f"\n  {name} 是要合并的分块，不能原样交出："
                    f"要等同组凑齐，合并成 {join(key[0], key[1], key[2])} 再交出"
                )
            elif want_key is None and any(p in want_name for p in MERGED):
                hint = (
                    f"\n  {want_name} 不是要合并的分块，应该读到就原样交出："
                    "只看整段模块名（倒数第二段），参数名还要是 weight 或 bias"
                )
            raise CheckFailed(
                f"{what} 应该是 {want_name}（读到第 {when} 个条目 {names[when - 1]} 时它就能交出了），"
                f"你交出的是 {name}{hint}{context}"
            )
        if value != want_value:
            raise CheckFailed(
                f"{what}（{name}）的值不对。{context}\n  应该是：{short(want_value, 200)}\n  你的是：{short(list(value), 200)}"
                + (
                    "\n  拼接顺序要固定是 q、k、v（gate、up），和到达顺序无关"
                    if sorted(value) == sorted(want_value)
                    else ""
                )
            )
        if source.pulled != when:
            arrived = names[when - 1]
            raise CheckFailed(
                f"{name} 交得太晚了：它在读到第 {when} 个条目（{arrived}）时就能交出，"
                f"你的代码却读到了第 {source.pulled} 个条目才交出。{context}\n"
                "  普通权重读到就交；一组的最后一块读到就合并、交出，不要等后面的条目，更不要先把输入全部读完。"
            )
        source.released.update(covers)
        del name, value
        received += 1

    if missing:
        if error is None:
            raise CheckFailed(
                f"输入里有没凑齐的组（缺 {'、'.join(missing)}），读完输入时应该抛 ValueError，你的代码却正常结束了{context}"
            )
        check(
            received == len(plan),
            f"抛 ValueError 之前，凑齐的组和普通权重应该都已经交出去了：应该交出 {len(plan)} 个，你交出了 {received} 个{context}",
        )
        message = str(error)
        absent = [m for m in missing if m not in message]
        check(
            not absent,
            f"ValueError 的消息里要写出每一个缺少的分块的完整名字，没写出：{'、'.join(absent)}\n"
            f"  你的消息：{message}{context}",
        )
    else:
        if error is not None:
            raise CheckFailed(f"所有的组都凑齐了，merge_stream 却抛了 ValueError：{error}{context}")
        check(
            received == len(plan),
            f"merge_stream 应该交出 {len(plan)} 个结果，你只交出了 {received} 个（下一个应该是 {plan[received][0] if received < len(plan) else ''}）{context}",
        )
        check(
            source.pulled == len(names),
            f"merge_stream 没有读完输入：{len(names)} 个条目只读了 {source.pulled} 个{context}",
        )


# ---------------------------------------------------------------------------
# 场景
# ---------------------------------------------------------------------------

QWEN3_LAYER = [
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
]
QWEN2_BIASES = ["self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"]
GLOBALS = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]


def layer(i: int, bias: bool = False, qk_norm: bool = True) -> list[str]:
    names = [n for n in QWEN3_LAYER if qk_norm or "_norm." not in n]
    if bias:
        names += QWEN2_BIASES
    return [f"model.layers.{i}.{n}" for n in names]


def model(num_layers: int, bias: bool = False) -> list[str]:
    return GLOBALS[:1] + [n for i in range(num_layers) for n in layer(i, bias)] + GLOBALS[1:]


def run(mod: object) -> None:
    merge_stream = require(mod, "merge_stream")
    rng = random.Random(SEED)

    # 题目里的表：Qwen3 的一层，按 safetensors 的字母序
    run_stream(merge_stream, sorted(layer(0)), "题目里的例子：Qwen3 一层，字母序")
    # 一层，q/k/v、gate/up 按原来的顺序到达
    run_stream(merge_stream, layer(0, qk_norm=False), "Llama 一层，按模块原来的顺序")
    # 空输入
    run_stream(merge_stream, [], "空输入")
    # 12 层的整个模型，按字母序（layers.0, layers.1, layers.10, layers.11, layers.2, ……）
    run_stream(merge_stream, sorted(model(12)), "12 层的模型，字母序")
    # 倒序：每组先到的是 v / up
    run_stream(merge_stream, sorted(model(6), reverse=True), "6 层的模型，倒序")
    # 按模块分组存：所有层的 q 先到，再是所有的 k、所有的 v——缓冲要一直攒到最后才释放
    by_module = sorted(model(4), key=lambda n: (n.split(".")[-2], n))
    run_stream(merge_stream, by_module, "4 层的模型，按模块名分组到达")
    # 跨文件：一层的 q 在第一个文件末尾，k、v 在第二个文件开头
    names = sorted(model(3))
    q1 = names.index("model.layers.1.self_attn.q_proj.weight")
    cross = names[: q1 + 1] + [
        n for n in names[q1 + 1 :] if "layers.1.self_attn.k" in n or "layers.1.self_attn.v" in n
    ]
    cross += [n for n in names if n not in cross]
    run_stream(merge_stream, cross, "3 层的模型，第 1 层的 q 和 k/v 分在两个文件里")
    # Qwen2：q/k/v 还有 bias，weight 和 bias 各自成组
    run_stream(merge_stream, sorted(model(3, bias=True)), "Qwen2 风格，带 q/k/v 的 bias，字母序")
    # 不该合并的名字：q_norm、MoE 的 gate、Phi-3 已经合并好的、FP8 的 weight_scale；MoE 专家里的 gate/up 要按各自的前缀合并
    tricky = [
        "model.layers.0.self_attn.qkv_proj.weight",
        "model.layers.0.mlp.gate_up_proj.weight",
        "model.layers.0.mlp.gate.weight",
        "model.layers.0.self_attn.q_proj.weight_scale",
        "model.layers.1.mlp.experts.0.gate_proj.weight",
        "model.layers.1.mlp.experts.1.up_proj.weight",
        "model.layers.1.mlp.experts.1.gate_proj.weight",
        "model.layers.1.mlp.experts.0.up_proj.weight",
        "model.layers.1.self_attn.q_norm.weight",
        "lm_head.weight",
    ]
    run_stream(
        merge_stream,
        tricky,
        "不该合并的名字（Phi-3 的 qkv_proj、MoE 的 gate、FP8 的 weight_scale）和 MoE 专家",
    )
    # 完全打乱
    for t in range(25):
        names = model(rng.randint(1, 4), bias=rng.random() < 0.3)
        rng.shuffle(names)
        run_stream(merge_stream, names, f"随机打乱的顺序 #{t + 1}")

    # 缺块：读完输入时抛 ValueError，写出缺的每一块
    names = sorted(model(2))
    names.remove("model.layers.1.self_attn.v_proj.weight")
    run_stream(merge_stream, names, "缺了第 1 层的 v_proj.weight")
    names = model(3, bias=True)
    for gone in (
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.2.self_attn.k_proj.bias",
        "model.layers.2.self_attn.v_proj.bias",
    ):
        names.remove(gone)
    run_stream(merge_stream, names, "缺了好几块（第 0 层的 up、第 2 层 k/v 的 bias）")
    for t in range(10):
        names = model(rng.randint(1, 3), bias=rng.random() < 0.5)
        rng.shuffle(names)
        grouped = [n for n in names if group_of(n)[0] is not None]
        for gone in rng.sample(grouped, rng.randint(1, 3)):
            names.remove(gone)
        run_stream(merge_stream, names, f"随机打乱、随机缺块 #{t + 1}")


if __name__ == "__main__":
    main(run)
