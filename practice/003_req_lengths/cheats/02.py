# 作弊：只拦住测试表里见过的那几组坏参数（提示词 [1, 2, 3] 配上那几个固定的 cached_len / output_len）
# 为什么必须判错：参数检查是给任何调用者用的：cached_len 等于或超过提示词长度的请求一个 token 都算不了，拿不到 logits；只认几组写死的输入，换一个提示词长度就放过去了
# 判词里要有：应该抛出 ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_Orig = ReqState
_SEEN = {((1, 2, 3), 3, 1), ((1, 2, 3), 5, 1), ((1, 2, 3), -1, 1), ((), 0, 4), ((1, 2, 3), 0, 0), ((1, 2, 3), 0, -1)}


class ReqState(_Orig):
    def __init__(self, input_ids, cached_len, output_len):
        if (tuple(input_ids), cached_len, output_len) in _SEEN:
            raise ValueError("参数不对")
        self.input_ids = list(input_ids)
        self.cached_len = cached_len
        self.device_len = len(self.input_ids)
        self.max_device_len = len(self.input_ids) + output_len
