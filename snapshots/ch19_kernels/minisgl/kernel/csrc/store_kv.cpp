// 写 KV 池（minisgl::store_kv）的 CPU 实现：第 i 个 token 的 K、V 各是连续的 [头数, head_dim]，
// 整块 memcpy 到池子里 out_loc[i] 号槽位。
//
// 算子的签名在 Python 里登记（kvcache/mha_pool.py，带一份 CompositeExplicitAutograd 的 Python 实现，
// CPU 和 CUDA 都能用）；这里只给 CPU 这个分派键再登记一份实现。分派器先找具体设备的实现，
// 所以库加载之后，CPU 张量走这里：省掉 Python 实现里两次按下标赋值的开销（一层一次，一步三十次）。
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>

namespace {

void copy_rows(at::Tensor pool, const at::Tensor& src_in, const int64_t* slots, int64_t n) {
  // pool：[槽位数, 头数, head_dim] 的视图；src：[n, 头数, head_dim]，每个 token 的那一行必须是连续的一块
  const at::Tensor src = src_in.stride(2) == 1 && src_in.stride(1) == src_in.size(2) ? src_in : src_in.contiguous();
  TORCH_CHECK(pool.stride(2) == 1 && pool.stride(1) == pool.size(2), "KV 池的每个槽位必须是连续的一块");
  const int64_t row_bytes = src.size(1) * src.size(2) * src.element_size();
  const int64_t num_slots = pool.size(0);
  char* dst = static_cast<char*>(pool.data_ptr());
  const char* from = static_cast<const char*>(src.data_ptr());
  const int64_t dst_stride = pool.stride(0) * pool.element_size(), src_stride = src.stride(0) * src.element_size();
  for (int64_t i = 0; i < n; ++i) TORCH_CHECK(0 <= slots[i] && slots[i] < num_slots, "槽位 ", slots[i], " 越界");
  at::parallel_for(0, n, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::memcpy(dst + slots[i] * dst_stride, from + i * src_stride, row_bytes);
  });
}

void store_kv(at::Tensor kv_buffer, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out_loc,
              int64_t layer_id) {
  TORCH_CHECK(k.scalar_type() == kv_buffer.scalar_type() && v.scalar_type() == kv_buffer.scalar_type(),
              "K、V 的 dtype 要和池子一样");
  const at::Tensor slots = out_loc.to(at::kLong).contiguous();
  const int64_t n = slots.numel();
  TORCH_CHECK(k.dim() == 3 && k.size(0) == n && v.sizes() == k.sizes(), "k、v 必须是 [len(out_loc), 头数, head_dim]");
  copy_rows(kv_buffer[0][layer_id], k, slots.data_ptr<int64_t>(), n);
  copy_rows(kv_buffer[1][layer_id], v, slots.data_ptr<int64_t>(), n);
}

}  // namespace

TORCH_LIBRARY_IMPL(minisgl, CPU, m) { m.impl("store_kv", &store_kv); }
