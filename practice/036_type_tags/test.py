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
    check_bad_wire(from_wire, rng)

    check_raises(ValueError, to_wire, {"__type__": "Req"}, what="to_wire({'__type__': 'Req'})（普通字典里有类型标签键）")
    check_raises(ValueError, to_wire, Req(1, [], Params(), {"x": {"__type__": 1}}),
                 what="to_wire(Req(..., meta={'x': {'__type__': 1}}))（嵌套的字典里有类型标签键）")
    for bad, why in [({1, 2}, "set"), (object(), "普通对象"), (Params, "dataclass 类本身"),
                     ([1, {2}], "列表里的 set")]:
        check_raises(TypeError, to_wire, bad, what=f"to_wire({short(bad)})（{why}）")
    check_planted(to_wire, rng)


# ---------------------------------------------------------------------------
# 坏输入放在随机生成的对象里随机的位置：只查顶层、只查某一层、只认几个固定的坏值，都过不去
# ---------------------------------------------------------------------------

# msgpack 不认识的值：每一种都会查到（顺序随机）
BAD_LEAVES = [
    ("一个 set", lambda rng: {rng.randrange(9), 9}),
    ("一个 frozenset", lambda rng: frozenset({rng.randrange(9)})),
    ("一个 bytearray", lambda rng: bytearray(rng.randbytes(rng.randint(0, 4)))),
    ("一个 range", lambda rng: range(rng.randint(0, 5))),
    ("一个 slice", lambda rng: slice(rng.randint(0, 3), rng.randint(4, 9))),
    ("一个普通对象", lambda rng: object()),
    ("一个 dataclass 类（不是实例）", lambda rng: rng.choice([Params, Req, Batch, Exit])),
]


def containers(value, path: str = "x") -> list[tuple[object, str]]:
    """value 里所有能放东西进去的地方：list、dict、dataclass 实例，带着从 x 走到它的路径。"""
    out = []
    if isinstance(value, list):
        out.append((value, path))
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            out += containers(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        out.append((value, path))
        for key, item in value.items():
            out += containers(item, f"{path}[{key!r}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        if dataclasses.fields(value):  # Exit 没有字段，放不进东西
            out.append((value, path))
        for f in dataclasses.fields(value):
            out += containers(getattr(value, f.name), f"{path}.{f.name}")
    return out


def plant(rng: random.Random, obj, bad):
    """把 bad 放进 obj（一份新的拷贝）里随机的一个地方；返回 (新的 obj, bad 所在的路径)。"""
    obj = copy.deepcopy(obj)
    places = containers(obj)
    if not places:  # 没有地方放：套一层列表
        return [obj, bad], "x[1]"
    where, path = rng.choice(places)
    if isinstance(where, list):
        i = rng.randint(0, len(where))
        where.insert(i, bad)
        return obj, f"{path}[{i}]"
    if isinstance(where, dict):
        key = f"bad{rng.randrange(100)}"
        where[key] = bad
        return obj, f"{path}[{key!r}]"
    name = rng.choice([f.name for f in dataclasses.fields(where)])
    setattr(where, name, bad)
    return obj, f"{path}.{name}"


def check_planted(to_wire, rng: random.Random) -> None:
    kinds = BAD_LEAVES * 3
    rng.shuffle(kinds)
    for what, make in kinds:
        obj, path = plant(rng, random_object(rng) if rng.random() < 0.8 else random_value(rng, 0), make(rng))
        check_raises(TypeError, to_wire, obj,
                     what=f"to_wire(x)，x = {short(obj, 160)}\n  （{path} 是{what}：msgpack 不认识它）")
    for _ in range(12):  # 普通字典里的类型标签键：随便哪一层、随便哪个字典
        obj = copy.deepcopy(random_object(rng) if rng.random() < 0.8 else random_value(rng, 0))
        tag = rng.choice(["Req", "Params", "", 1, None])
        plain = [(d, path) for d, path in containers(obj) if type(d) is dict]
        if plain and rng.random() < 0.7:
            target, path = rng.choice(plain)
            target["__type__"] = tag
        else:
            obj, path = plant(rng, obj, {"__type__": tag, "k0": rng.randint(0, 9)})
        check_raises(ValueError, to_wire, obj,
                     what=f"to_wire(x)，x = {short(obj, 160)}\n  （{path} 是一个普通字典，里面有类型标签键）")


REQUIRED = {name: [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            for name, cls in CLASSES.items()}


def tagged(value, path: str = "x") -> list[tuple[dict, str]]:
    """线上格式里所有带标签的字典（对象），带着路径。"""
    out = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            out += tagged(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        if "__type__" in value:
            out.append((value, path))
        for key, item in value.items():
            out += tagged(item, f"{path}[{key!r}]")
    return out


def check_bad_wire(from_wire, rng: random.Random) -> None:
    """随机对象的线上格式里，随机一个对象坏了：标签不在白名单里、缺了必填字段、多了字段。"""
    kinds = ["白名单外", "标签乱写", "缺字段", "多字段"] * 4
    rng.shuffle(kinds)
    for kind in kinds:
        for _ in range(50):
            wire = reference(random_object(rng))
            objects = tagged(wire)
            if kind == "缺字段":
                objects = [(d, path) for d, path in objects if REQUIRED[d["__type__"]]]
            if objects:
                break
        else:
            continue
        target, path = rng.choice(objects)
        name, allowed = target["__type__"], dict(CLASSES)
        if kind == "白名单外":  # 一个真的类，只是这次不在白名单里（被评测的模块里正好有同名的全局变量）
            del allowed[name]
            why = f"{path} 的标签 {name} 不在白名单 {sorted(allowed)} 里"
        elif kind == "标签乱写":
            target["__type__"] = rng.choice(["os.system", "Request", "params", "", "__import__", "dict", "object"])
            why = f"{path} 的标签 {target['__type__']!r} 不在白名单里"
        elif kind == "缺字段":
            field_name = rng.choice(REQUIRED[name])
            del target[field_name]
            why = f"{path}（{name}）缺了必填字段 {field_name}"
        else:
            field_name = rng.choice(["evil", "uid2", "Tokens", "_x", "__init__"])
            target[field_name] = rng.choice([1, None, "x", []])
            why = f"{path}（{name}）多了字段 {field_name}"
        check_raises(ValueError, from_wire, allowed, wire,
                     what=f"from_wire(白名单 {sorted(allowed)}, {short(wire, 160)})\n  （{why}）")


if __name__ == "__main__":
    main(run)
