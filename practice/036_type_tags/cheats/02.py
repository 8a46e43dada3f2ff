# 作弊：嵌套的对象不还原，留成字典
# 为什么必须判错：题目要求 from_wire 递归还原：字段值、列表、不带标签的字典里的对象都要还原；它只还原最外层，嵌套的 dataclass 留成带标签的字典，from_wire(classes, to_wire(x)) != x。
# 判词里要有：from_wire
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def from_wire(classes, data):
    if isinstance(data, dict) and TYPE_KEY in data:
        if data[TYPE_KEY] not in classes:
            raise ValueError("未知的类型标签")
        try:
            return classes[data[TYPE_KEY]](**{k: v for k, v in data.items() if k != TYPE_KEY})
        except TypeError as e:
            raise ValueError(str(e)) from e
    return data
