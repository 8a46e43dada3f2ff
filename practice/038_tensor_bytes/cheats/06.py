# 作弊：tensor_to_wire 只拒绝复数类型，别的类型照样按 str(dtype) 起名发出去
# 为什么必须判错：只有 DTYPES 里的十种能发；uint16、float8 这些 torch 里有、收件方却不认识的类型，也得在发出去之前抛 ValueError。
# 判词里要有：类型不在 DTYPES 里
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def tensor_to_wire(t):
    if t.dim() != 1:
        raise ValueError(f"只支持一维张量，收到形状 {tuple(t.shape)}")
    if t.is_complex():
        raise ValueError(f"不支持复数 {t.dtype}")
    as_bytes = t.clone(memory_format=torch.contiguous_format).view(torch.uint8)
    return {"dtype": _NAMES.get(t.dtype, str(t.dtype).removeprefix("torch.")), "buffer": bytes(as_bytes.tolist())}
