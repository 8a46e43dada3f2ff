# 作弊：不建树：一个字典记住每个整页前缀
# 为什么必须判错：题目要求建一棵整页对齐的 radix 树（节点的 key/value、按第一页做键的孩子表、需要时切分）；它用字典记住每个整页前缀，返回值碰巧对，但树一直是空的，测试查整棵树的形状时露馅。
# 判词里要有：孩子表
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class RadixTree:
    def __init__(self, page_size):
        self.page_size, self.root, self.pages = page_size, Node([], [], None), {}

    def match(self, ids):
        n, values = 0, []
        while n + self.page_size <= len(ids) and tuple(ids[: n + self.page_size]) in self.pages:
            values += self.pages[tuple(ids[: n + self.page_size])]
            n += self.page_size
        return n, values

    def insert(self, ids, values):
        if len(ids) != len(values):
            raise ValueError("长度不同")
        cached = self.match(ids)[0]
        for end in range(cached + self.page_size, len(ids) - len(ids) % self.page_size + 1, self.page_size):
            self.pages[tuple(ids[:end])] = list(values[end - self.page_size : end])
        return cached
