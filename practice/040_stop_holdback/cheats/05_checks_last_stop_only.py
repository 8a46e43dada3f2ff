# 作弊：只查最后一个停止串是不是空串，别处的空串悄悄扔掉
# 为什么必须判错：空串在列表的任何位置都要抛 ValueError。固定的坏例子里空串恰好在末尾，只查那里的代码以前能过
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class StopFilter(StopFilter):
    def __init__(self, stops):
        if stops and stops[-1] == "":
            raise ValueError("最后一个停止串是空的")
        super().__init__([s for s in stops if s])
