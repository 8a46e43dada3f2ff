# 作弊：退出之后接着处理，最后才返回 False
# 为什么必须判错：题目要求遇到 ("exit",) 后面的消息（同一个包里、外层包里排在它后面的）一条都不处理；它记下退出后接着处理，exit 后面的 user/abort 照样调用了 add_req、abort_req。
# 判词里要有：退出之后还在处理消息
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def dispatch(msgs, add_req, abort_req):
    rejects, running = [], True
    def one(msg):
        nonlocal running
        if msg[0] == "batch":
            for m in msg[1]:
                one(m)
        elif msg[0] == "exit":
            running = False
        elif msg[0] == "user":
            try:
                add_req(msg[1], msg[2])
            except ValueError as e:
                rejects.append((msg[1], str(e)))
        elif msg[0] == "abort":
            abort_req(msg[1])
        else:
            raise TypeError(msg[0])
    for m in msgs:
        one(m)
    return rejects, running
