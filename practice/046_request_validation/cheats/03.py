# 作弊：字符串的数字也收下
# 为什么必须判错：它绕过了这道题的要点（字符串的数字也收下），只在测试没查到的地方才“对”。
# 判词里要有：坏请求没有被拦住｜报错的 param
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_validate = validate_chat_request


def validate_chat_request(body):
    if isinstance(body, dict) and isinstance(body.get("temperature"), str):  # "0.5" 也收下
        body = {**body, "temperature": float(body["temperature"])}
    return _validate(body)
