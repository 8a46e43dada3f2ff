# 作弊：每步把整段序列 [0, device_len) 都当输入
# 为什么必须判错：题目要求每个请求只取这一步要算的 [cached_len, device_len)；它每步都把整段 [0, device_len) 当输入，decode 时长度远超请求数，返回的张量形状就和参考不一样。
# 判词里要有：形状
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def input_indices(reqs):
    rows = [r[0] for r in reqs for _ in range(r[2])]
    positions = [p for r in reqs for p in range(r[2])]
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64)
