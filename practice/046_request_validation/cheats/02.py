# 作弊：不认识的字段悄悄忽略
# 为什么必须判错：题目要求不认识的字段要报错、param 是它的名字；它先把不认识的字段悄悄扔掉再检查，拼错的字段名被当成没给，客户端以为生效的参数其实没生效。
# 判词里要有：param
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_validate = validate_chat_request


def validate_chat_request(body):
    if isinstance(body, dict):  # 不认识的字段先悄悄扔掉，再照常检查
        body = {k: v for k, v in body.items() if k in FIELDS}
    return _validate(body)
