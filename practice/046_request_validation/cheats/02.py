# 作弊：不认识的字段悄悄忽略
# 为什么必须判错：它绕过了这道题的要点（不认识的字段悄悄忽略），只在测试没查到的地方才“对”。
# 判词里要有：param
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_validate = validate_chat_request


def validate_chat_request(body):
    if isinstance(body, dict):  # 不认识的字段先悄悄扔掉，再照常检查
        body = {k: v for k, v in body.items() if k in FIELDS}
    return _validate(body)
