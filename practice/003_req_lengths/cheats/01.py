# 作弊：extend_len 在构造时算好存成数字
# 为什么必须判错：它绕过了这道题的要点（extend_len 在构造时算好存成数字），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_Orig = ReqState
class ReqState(_Orig):
    def __init__(self, input_ids, cached_len, output_len):
        super().__init__(input_ids, cached_len, output_len)
        self.__dict__["_frozen"] = self.device_len - self.cached_len
    extend_len = property(lambda self: self._frozen)
