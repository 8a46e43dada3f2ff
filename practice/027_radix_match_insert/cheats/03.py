# 作弊：不建树：一个字典记住每个整页前缀
# 为什么必须判错：它绕过了这道题的要点（不建树：一个字典记住每个整页前缀），只在测试没查到的地方才“对”。
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
