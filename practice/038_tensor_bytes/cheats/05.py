# 作弊：类型名直接去 torch 里找（getattr(torch, name)），不看 DTYPES
# 为什么必须判错：收到的字节来自另一个进程，只能还原 DTYPES 里的十种；complex64、uint16 这些 torch 里有、题目却不支持的名字也得抛 ValueError。
# 判词里要有：不认识的类型名
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def tensor_from_wire(d):
    name, buffer = d["dtype"], d["buffer"]
    dtype = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"不认识的类型名 {name!r}")
    size = torch.empty(0, dtype=dtype).element_size()
    if len(buffer) % size:
        raise ValueError(f"{len(buffer)} 字节不是 {name} 元素大小 {size} 的整数倍")
    if len(buffer) == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(bytearray(buffer), dtype=dtype).clone()
