"""练习 036 的评测：随机嵌套的 dataclass 与参考实现比较、往返还原，以及白名单和坏输入。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import dataclasses
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


@dataclass
class Params:
    temperature: float = 0.0
    stop: list = field(default_factory=list)
    ignore_eos: bool = False


@dataclass
class Req:
    uid: int
    tokens: list
    params: Params
    meta: dict = field(default_factory=dict)


@dataclass
class Batch:
    reqs: list
    tag: bytes = b""


@dataclass
class Exit:
    pass


CLASSES = {"Params": Params, "Req": Req, "Batch": Batch, "Exit": Exit}


def reference(obj):
    """独立写的参考：先判断类型名单，再逐字段处理。"""
    if obj is None or type(obj) in (bool, int, float, str, bytes):
        return obj
    if type(obj) in (list, tuple):
        return [reference(v) for v in obj]
    if type(obj) is dict:
        return {k: reference(v) for k, v in obj.items()}
    out = {"__type__": type(obj).__name__}
    out.update({f.name: reference(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
    return out


def random_value(rng: random.Random, depth: int):
    kind = rng.choice(["none", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "obj"]
                      if depth < 3 else ["int", "str", "bool", "none"])
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.randint(-2**40, 2**40)
    if kind == "float":
        return rng.uniform(-10, 10)
    if kind == "str":
        return "".join(rng.choice("ab你好 \n🙂") for _ in range(rng.randint(0, 6)))
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))
    if kind in ("list", "tuple"):
        items = [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {f"k{i}": random_value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    return random_object(rng, depth + 1)


def random_object(rng: random.Random, depth: int = 0):
    params = Params(rng.choice([0.0, 0.7, 1.5]), [rng.choice(["\n", "。", "</s>"])] * rng.randint(0, 2),
                    rng.random() < 0.5)
    choice = rng.randrange(4)
    if choice == 0:
        return params
    if choice == 3:
        return Exit()
    req = Req(rng.randint(0, 10**6), [rng.randint(0, 50000) for _ in range(rng.randint(0, 8))], params,
              {"note": random_value(rng, depth + 1)} if depth < 3 else {})
    if choice == 1:
        return req
    return Batch([req, Req(1, [], Params()), Exit() if depth >= 3 else random_value(rng, depth + 1)],
                 bytes(range(rng.randint(0, 5))))


def as_tuple_free(value):
    """往返之后 tuple 会变成 list：比较还原结果时先把期望值里的 tuple 也换成 list。"""
    if isinstance(value, (list, tuple)):
        return [as_tuple_free(v) for v in value]
    if isinstance(value, dict):
        return {k: as_tuple_free(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value)(**{f.name: as_tuple_free(getattr(value, f.name))
                              for f in dataclasses.fields(value)})
    return value


def same_types(a, b) -> bool:
    """逐层比较类型（== 会把 1 和 True、1 和 1.0 当成相等）。"""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_types, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_types(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same_types(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return True


def run(mod: object) -> None:
    to_wire = require(mod, "to_wire")
    from_wire = require(mod, "from_wire")

    example = Req(7, [1, 2], Params(0.5, ["\n"]))
    want = {"__type__": "Req", "uid": 7, "tokens": [1, 2],
            "params": {"__type__": "Params", "temperature": 0.5, "stop": ["\n"], "ignore_eos": False},
            "meta": {}}
    check_equal(to_wire(example), want, "to_wire(题目里的例子)")

    rng = random.Random(SEED)
    for _ in range(300):
        obj = random_object(rng) if rng.random() < 0.8 else random_value(rng, 0)
        before = copy.deepcopy(obj)
        wire = to_wire(obj)
        context = short(obj, 160)
        expected = reference(obj)
        # 先比类型：tuple 没有变成 list 时，直接说出是哪里不对
        check(same_types(wire, expected),
              f"to_wire 的结果类型与参考的不同（比如 tuple 没有变成 list，或者 True 变成了 1）：\n"
              f"  输入：{context}\n  你的是：{short(wire, 160)}\n  应该是：{short(expected, 160)}")
        check_equal(wire, expected, "to_wire 的结果", context)
        check_equal(obj, before, "to_wire 之后的输入对象（不应该被改动）", context)
        back = from_wire(CLASSES, wire)
        check_equal(back, as_tuple_free(obj), "from_wire(classes, to_wire(x))", context)
        check(same_types(back, as_tuple_free(obj)),
              f"from_wire 还原出的值相等、类型却不同（嵌套的对象要还原成对象，不是字典）：\n"
              f"  输入：{context}\n  你的是：{short(back, 160)}")

    # 白名单：表外的类型一律拒绝，哪怕你的模块里正好有同名的类
    for name in ("Params", "Batch"):
        setattr(mod, name, CLASSES[name])  # 故意放进被评测模块的全局变量
    only_req = {"Req": Req}
    for data, why in [
        ({"__type__": "Batch", "reqs": [], "tag": b""}, "标签 Batch 不在白名单里"),
        ({"__type__": "Req", "uid": 1, "tokens": [], "meta": {},
          "params": {"__type__": "Params", "temperature": 0.0, "stop": [], "ignore_eos": False}},
         "嵌套的 Params 不在白名单里"),
        ({"__type__": "os.system", "command": "echo hi"}, "标签是一个函数名"),
        ({"__type__": "Req", "uid": 1}, "缺了字段"),
        ({"__type__": "Req", "uid": 1, "tokens": [], "params": None, "meta": {}, "evil": 1}, "多了字段"),
    ]:
        check_raises(ValueError, from_wire, only_req, data, what=f"from_wire({{'Req': Req}}, {short(data, 90)})（{why}）")

    check_raises(ValueError, to_wire, {"__type__": "Req"}, what="to_wire({'__type__': 'Req'})（普通字典里有类型标签键）")
    check_raises(ValueError, to_wire, Req(1, [], Params(), {"x": {"__type__": 1}}),
                 what="to_wire(Req(..., meta={'x': {'__type__': 1}}))（嵌套的字典里有类型标签键）")
    for bad, why in [({1, 2}, "set"), (object(), "普通对象"), (Params, "dataclass 类本身"),
                     ([1, {2}], "列表里的 set")]:
        check_raises(TypeError, to_wire, bad, what=f"to_wire({short(bad)})（{why}）")


if __name__ == "__main__":
    main(run)
