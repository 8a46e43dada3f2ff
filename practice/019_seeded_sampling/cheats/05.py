# 作弊：温度的检查给“浮点误差”留了余量，只拦 < -0.1 的温度（nan 另外拦）
# 为什么必须判错：温度哪怕只比 0 小一点点，logits 除以它整行就反了号：最不可能的 token 变成最可能的，抽出来的全是错的。题目说负数就抛 ValueError，没有余量可留；旧测试只拿 -0.5 试过负温度
# 判词里要有：temperatures 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def sample(logits, temperatures, top_k, top_p, generator):
    if bool(torch.isnan(temperatures).any()) or bool((temperatures < -0.1).any()):
        raise ValueError("温度不对")
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    greedy = (temperatures == 0) | (top_k == 1)
    out = logits.argmax(dim=-1)
    rows = (~greedy).nonzero().flatten()
    if rows.numel() > 0:
        x = logits[rows].float() / temperatures[rows, None].float()
        x = top_k_top_p_filter(x, top_k[rows], top_p[rows])
        out[rows] = torch.multinomial(torch.softmax(x, dim=-1), 1, generator=generator).squeeze(1)
    return out
