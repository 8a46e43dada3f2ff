# 作弊：字符串的数字也收下
# 为什么必须判错：题目要求字符串 "10" 也不是数，temperature 必须是整数或浮点数；它把字符串的 temperature 转成 float 收下，本该拦住的坏请求通过了，或者报错的 param 不对。
# 判词里要有：坏请求没有被拦住｜报错的 param
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_validate = validate_chat_request


def validate_chat_request(body):
    if isinstance(body, dict) and isinstance(body.get("temperature"), str):  # "0.5" 也收下
        body = {**body, "temperature": float(body["temperature"])}
    return _validate(body)
