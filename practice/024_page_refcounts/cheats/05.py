# 作弊：只查列表里最后一个页号（旧评测里不存在的页号总在列表末尾）
# 为什么必须判错：页号要逐个检查；不存在的页号夹在列表中间时，-1 被当成最后一页、越界的页号抛 IndexError，都不是题目要的 ValueError。
# 判词里要有：号页不存在
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _check_last_page(self, pages):
    for page in list(pages)[-1:]:
        if not 0 <= page < self.num_pages:
            raise ValueError(f"没有 {page} 号页")


PagePool._check_pages = _check_last_page
