# 作弊：调度器自己的错误先记下，把剩下的消息处理完再抛出去
# 为什么必须判错：调度器已经坏了，还接着往里塞请求、中止请求，只会把状态弄得更乱；题目要的是原样抛出去，出错的那条后面的消息一条都不该处理。旧评测只看抛没抛，不看之后有没有接着调用。
# 判词里要有：后面的消息不该再处理
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_dispatch_now = dispatch


def dispatch(msgs, add_req, abort_req):
    held = []

    def careful_add(uid, prompt_len):
        try:
            add_req(uid, prompt_len)
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001 - 先记下，最后再抛
            held.append(e)

    result = _dispatch_now(msgs, careful_add, abort_req)
    if held:
        raise held[0]
    return result
