// MoE 的专家计算（float32）：按 moe_align_block_size 排好的布局，一段一段地算。
//
// 排好之后，同一个专家的块是连在一起的一段。对每一段：挑出段里的真行（补齐用的空行跳过），
// 取出这些 token 的 x，过一遍这个专家的 gate_up、silu·up、down，乘上路由权重，加回各自的行。
// 权重 w1[e]、w2[e] 是原地读的视图，不拷贝；两次矩阵乘交给 at::mm（多线程的 BLAS）。
// 和 Python 里挨个专家算（moe/loop.py）比，省掉的是每个专家十来次算子分派和“谁选了 e”的查找。
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

namespace {

at::Tensor fused_moe(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& w2,
                     const at::Tensor& topk_weights, const at::Tensor& sorted_ids,
                     const at::Tensor& expert_ids, int64_t block_size) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && w1.scalar_type() == at::kFloat &&
                  w2.scalar_type() == at::kFloat && topk_weights.scalar_type() == at::kFloat,
              "minisgl 的 fused_moe 只支持 float32");
  TORCH_CHECK(sorted_ids.scalar_type() == at::kInt && expert_ids.scalar_type() == at::kInt,
              "fused_moe：sorted_ids、expert_ids 要是 int32");
  TORCH_CHECK(x.dim() == 2 && w1.dim() == 3 && w2.dim() == 3 && w1.size(2) == x.size(1) &&
                  w2.size(1) == x.size(1) && w1.size(1) == 2 * w2.size(2) && w1.size(0) == w2.size(0),
              "fused_moe：形状对不上，x ", x.sizes(), "，w1 ", w1.sizes(), "，w2 ", w2.sizes());
  TORCH_CHECK(sorted_ids.numel() == expert_ids.numel() * block_size, "fused_moe：块数和 sorted_ids 的长度对不上");
  const int64_t num_tokens = x.size(0), top_k = topk_weights.size(1), pairs = num_tokens * top_k;
  const int64_t inter = w2.size(2), num_blocks = expert_ids.numel();
  const at::Tensor xc = x.contiguous(), weights = topk_weights.contiguous().view(-1);
  const at::Tensor ids_c = sorted_ids.contiguous(), experts_c = expert_ids.contiguous();
  const int32_t* ids = ids_c.data_ptr<int32_t>();
  const int32_t* experts = experts_c.data_ptr<int32_t>();
  at::Tensor out = at::zeros_like(xc);
  std::vector<int64_t> slots;
  for (int64_t b = 0; b < num_blocks;) {
    const int32_t e = experts[b];
    if (e < 0) break;  // 用到的块都在前面
    TORCH_CHECK(e < w1.size(0), "fused_moe：专家编号 ", e, " 超出范围");
    int64_t end = b;
    while (end < num_blocks && experts[end] == e) ++end;
    slots.clear();
    for (int64_t r = b * block_size; r < end * block_size; ++r)
      if (ids[r] < pairs) slots.push_back(ids[r]);  // 空行（== pairs）跳过
    b = end;
    if (slots.empty()) continue;
    const at::Tensor slot = at::tensor(slots, at::kLong);
    const at::Tensor token = at::floor_divide(slot, top_k);
    const at::Tensor h = at::mm(xc.index_select(0, token), w1[e].t());  // [n, 2·inter]：gate 在前
    const at::Tensor a = at::silu(h.narrow(1, 0, inter)) * h.narrow(1, inter, inter);
    at::Tensor y = at::mm(a, w2[e].t());  // [n, hidden]
    y.mul_(weights.index_select(0, slot).unsqueeze(1));
    out.index_add_(0, token, y);
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(minisgl, m) {
  m.def("fused_moe(Tensor x, Tensor w1, Tensor w2, Tensor topk_weights, Tensor sorted_ids, "
        "Tensor expert_ids, int block_size) -> Tensor");
}

TORCH_LIBRARY_IMPL(minisgl, CPU, m) { m.impl("fused_moe", &fused_moe); }
