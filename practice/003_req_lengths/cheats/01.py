# 作弊：extend_len 在构造时算好存成数字
# 为什么必须判错：题目要求 extend_len 是每次现算的 @property（device_len - cached_len）；它在构造时存成数字，complete_one 之后 decode 的 extend_len 应是 1，它还是整段提示的长度。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_Orig = ReqState
class ReqState(_Orig):
    def __init__(self, input_ids, cached_len, output_len):
        super().__init__(input_ids, cached_len, output_len)
        self.__dict__["_frozen"] = self.device_len - self.cached_len
    extend_len = property(lambda self: self._frozen)
