# 作弊：查完顺手摘掉没锁住的叶子（改了树）
# 为什么必须判错：题目要求 check_integrity 不修改树；它查完顺手摘掉没锁住的叶子、改了 evictable_size，合法的树查完就变了样，评测不允许对它的对象做 setattr。
# 判词里要有：评测不允许对它的对象做 setattr
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_check = check_integrity


def check_integrity(cache):
    _check(cache)
    stack = [cache.root]
    while stack:
        node = stack.pop()
        for first, child in list(node.children.items()):
            if not child.children and child.ref_count == 0:
                del node.children[first]
                cache.evictable_size -= len(child.key)
            else:
                stack.append(child)
