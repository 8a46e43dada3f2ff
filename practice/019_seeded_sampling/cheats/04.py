# 作弊：不管温度和过滤，全部贪心
# 为什么必须判错：题目要求采样行按 softmax(过滤(logits / T)) 的频率抽样；它全部取 argmax，温度大于 0 的采样行永远只出一个 token，换种子结果不变，卡方检验也过不了。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    return logits.argmax(dim=-1)
