# 作弊：每块按 ceil(L / n) 个切（最后几块变短，L 比 n 小时后面的块全空）
# 为什么必须判错：题目规定第 i 块从 i * L // n 开始，各块长度最多差 1；按 ceil 切，L = 5、n = 4 时块长是 2、2、1、0，有的 rank 整条链路一步都闲着，而且收发双方对块的边界说法不一，测试按规定的边界检查 chunk_bounds 和每条消息的长度。
# 判词里要有：chunk_bounds｜块
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def chunk_bounds(length, n):
    if n <= 0:
        raise ValueError("n 必须是正数")
    if length < 0:
        raise ValueError("length 不能是负数")
    per = -(-length // n)
    return [min(i * per, length) for i in range(n + 1)]
