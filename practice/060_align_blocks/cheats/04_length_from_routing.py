# 作弊：排好、补齐就返回，不再补到 padded_capacity：缓冲区有多长由这次的路由决定
# 为什么必须判错：题目要求总长是 padded_capacity(M·k, E, block_size)，只取决于形状：CUDA 图录下的是固定大小的缓冲区、torch.compile 按形状特化，长度跟着路由变，每一步都要重录、重编译。路由没把上界用满时（几乎总是这样）长度就不对。
# 判词里要有：形状
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_full = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    sorted_ids, expert_ids, used = _full(topk_ids, block_size, num_experts)
    return sorted_ids[:used], expert_ids[:used // block_size], used
