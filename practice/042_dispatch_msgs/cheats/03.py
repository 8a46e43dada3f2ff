# 作弊：只在最外层检查消息类型，包里不认识的悄悄跳过
# 为什么必须判错：题目要求不认识的消息种类抛 TypeError，包里嵌套的也一样；它只在最外层查类型，包里嵌套的不认识的消息被悄悄跳过、不报错。
# 判词里要有：包里嵌套的不认识的消息

def dispatch(msgs, add_req, abort_req):
    # cheat: TypeError only at top level; unknown kinds inside batches silently ignored
    for m in msgs:
        if m[0] not in ("user", "abort", "exit", "batch"): raise TypeError(m[0])
    rejects = []
    def one(m):
        if m[0] == "batch": return all(one(x) for x in m[1])
        if m[0] == "exit": return False
        if m[0] == "user":
            try: add_req(m[1], m[2])
            except ValueError as e: rejects.append((m[1], str(e)))
        elif m[0] == "abort": abort_req(m[1])
        return True
    return rejects, all(one(m) for m in msgs)
