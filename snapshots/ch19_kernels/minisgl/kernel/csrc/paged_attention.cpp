// 分页注意力（CPU）：隔着页表直接读 KV 池，不先把每个请求的 K/V 拷成连续的一块。
//
// 一批里每个请求有 n_q 个 query（decode 时 1 个）、n_k 个 key；query 是序列的最后 n_q 个 token，
// 第 i 个 query 能看见前 n_k - n_q + i + 1 个 key（右下对齐的因果掩码）。第 j 个 key 在池里的槽位是
// page_table[rows[b], j]。每个 (query token, KV 头) 是一份独立的活，分给 torch 的线程池：
// 同一个 KV 头的 G = hq / hkv 个 q 头一起算，每行 K、V 从内存里只读一次。
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

// D > 0：head_dim 是编译期常数（64、128），按 d 的循环完全展开成几条向量指令；D == 0：d 在运行时给出
template <typename scalar_t, int D>
void attend_one(const scalar_t* q, const scalar_t* k, const scalar_t* v, const int32_t* slots,
                int64_t n, int64_t G, int64_t d_runtime, int64_t k_stride, int64_t v_stride, float scale,
                float* scores, float* qf, float* acc, scalar_t* out) {
  // q、out：G 个头，每个 d 个数，相邻存放；k、v：已经指到这个 KV 头；scores、qf、acc：调用方的草稿纸
  const int64_t d = D > 0 ? D : d_runtime;
  for (int64_t i = 0; i < G * d; ++i) qf[i] = static_cast<float>(q[i]) * scale;
  // 槽位是散的，硬件预取器猜不到下一行在哪：提前 kAhead 个 key 把那一行要进缓存
  constexpr int64_t kAhead = 8;
  // 第一遍：分数。K 的一行读一次，G 个头都用它
  for (int64_t j = 0; j < n; ++j) {
    if (j + kAhead < n) __builtin_prefetch(k + static_cast<int64_t>(slots[j + kAhead]) * k_stride);
    const scalar_t* kr = k + static_cast<int64_t>(slots[j]) * k_stride;
    for (int64_t g = 0; g < G; ++g) {
      const float* qg = qf + g * d;
      float dot = 0.f;
      for (int64_t t = 0; t < d; ++t) dot += qg[t] * static_cast<float>(kr[t]);
      scores[g * n + j] = dot;
    }
  }
  // softmax：先减最大值，exp 才不会溢出；-ffast-math 下这几个循环都是向量指令
  for (int64_t g = 0; g < G; ++g) {
    float* sg = scores + g * n;
    float m = std::numeric_limits<float>::lowest();  // 分数都是有限的数
    for (int64_t j = 0; j < n; ++j) m = std::max(m, sg[j]);
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) {
      sg[j] = std::exp(sg[j] - m);
      sum += sg[j];
    }
    const float inv = 1.f / sum;
    for (int64_t j = 0; j < n; ++j) sg[j] *= inv;
  }
  // 第二遍：按权重累加 V
  for (int64_t i = 0; i < G * d; ++i) acc[i] = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    if (j + kAhead < n) __builtin_prefetch(v + static_cast<int64_t>(slots[j + kAhead]) * v_stride);
    const scalar_t* vr = v + static_cast<int64_t>(slots[j]) * v_stride;
    for (int64_t g = 0; g < G; ++g) {
      const float p = scores[g * n + j];
      float* a = acc + g * d;
      for (int64_t t = 0; t < d; ++t) a[t] += p * static_cast<float>(vr[t]);
    }
  }
  for (int64_t i = 0; i < G * d; ++i) out[i] = static_cast<scalar_t>(acc[i]);
}

at::Tensor paged_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                           const at::Tensor& page_table, const at::Tensor& rows,
                           const at::Tensor& qo_indptr, const at::Tensor& seq_lens_k, double scale) {
  TORCH_CHECK(q.dim() == 3 && k_cache.dim() == 3 && v_cache.dim() == 3, "q、k_cache、v_cache 都应是三维");
  TORCH_CHECK(q.is_contiguous(), "q 要连续");
  TORCH_CHECK(k_cache.stride(2) == 1 && v_cache.stride(2) == 1 && k_cache.stride(1) == k_cache.size(2) &&
                  v_cache.stride(1) == v_cache.size(2),
              "KV 池每个槽位里的 [头, d] 要连续");
  TORCH_CHECK(k_cache.scalar_type() == q.scalar_type() && v_cache.scalar_type() == q.scalar_type(),
              "q 和 KV 池的 dtype 要相同");
  TORCH_CHECK(v_cache.sizes() == k_cache.sizes(), "k_cache 和 v_cache 的形状要相同");
  for (const at::Tensor* t : {&page_table, &rows, &qo_indptr, &seq_lens_k})
    TORCH_CHECK(t->scalar_type() == at::kInt && t->is_contiguous(), "页表和元数据要是连续的 int32");
  TORCH_CHECK(page_table.dim() == 2 && page_table.stride(1) == 1, "页表应是 [行, 列] 且每行连续");
  const int64_t T = q.size(0), hq = q.size(1), d = q.size(2), hkv = k_cache.size(1);
  const int64_t B = rows.size(0);
  TORCH_CHECK(hkv > 0 && hq % hkv == 0 && k_cache.size(2) == d, "头数或 head_dim 对不上");
  TORCH_CHECK(qo_indptr.size(0) == B + 1 && seq_lens_k.size(0) == B, "元数据的长度对不上");
  const int64_t G = hq / hkv;
  const int32_t* indptr = qo_indptr.data_ptr<int32_t>();
  const int32_t* lens = seq_lens_k.data_ptr<int32_t>();
  const int32_t* row_ids = rows.data_ptr<int32_t>();
  const int32_t* table = page_table.data_ptr<int32_t>();
  TORCH_CHECK(indptr[0] == 0 && indptr[B] == T, "qo_indptr 要从 0 走到 q 的 token 数");
  // 先把要读的每个槽位查一遍（和注意力本身比，这点活可以忽略）：坏的元数据是一条错误，不是越界读
  const int64_t num_slots = k_cache.size(0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n_q = indptr[b + 1] - indptr[b];
    TORCH_CHECK(n_q >= 0 && n_q <= lens[b] && lens[b] <= page_table.size(1), "第 ", b, " 个请求的长度不对");
    TORCH_CHECK(row_ids[b] >= 0 && row_ids[b] < page_table.size(0), "第 ", b, " 个请求的页表行号越界");
    const int32_t* slots = table + static_cast<int64_t>(row_ids[b]) * page_table.stride(0);
    for (int64_t j = 0; j < lens[b]; ++j)
      TORCH_CHECK(slots[j] >= 0 && slots[j] < num_slots, "第 ", b, " 个请求第 ", j, " 个 key 的槽位 ", slots[j],
                  " 不在 KV 池里（共 ", num_slots, " 个槽位）");
  }
  at::Tensor out = at::empty_like(q);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "paged_attention", [&] {
    const scalar_t* qp = q.data_ptr<scalar_t>();
    const scalar_t* kp = k_cache.data_ptr<scalar_t>();
    const scalar_t* vp = v_cache.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    const int64_t ks = k_cache.stride(0), vs = v_cache.stride(0), L = page_table.stride(0);
    int64_t longest = 0;
    for (int64_t b = 0; b < B; ++b) longest = std::max<int64_t>(longest, lens[b]);
    at::parallel_for(0, T * hkv, 1, [&](int64_t begin, int64_t end) {
      // 每个线程一份草稿纸，够这一批最长的请求用：循环里不再分配内存
      std::vector<float> scores(G * longest), qf(G * d), acc(G * d);
      for (int64_t w = begin; w < end; ++w) {
        const int64_t t = w / hkv, h = w % hkv;
        // 这个 token 属于哪个请求：qo_indptr 里第一个 > t 的位置减一
        const int64_t b = std::upper_bound(indptr, indptr + B + 1, static_cast<int32_t>(t)) - indptr - 1;
        const int64_t n_q = indptr[b + 1] - indptr[b];
        const int64_t visible = lens[b] - n_q + (t - indptr[b]) + 1;
        const int64_t head = (t * hq + h * G) * d;
        const int32_t* slots = table + row_ids[b] * L;
        auto* fn = d == 64 ? attend_one<scalar_t, 64> : d == 128 ? attend_one<scalar_t, 128> : attend_one<scalar_t, 0>;
        fn(qp + head, kp + h * d, vp + h * d, slots, visible, G, d, ks, vs, static_cast<float>(scale),
           scores.data(), qf.data(), acc.data(), op + head);
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY(minisgl, m) {
  m.def("paged_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor page_table, Tensor rows, "
        "Tensor qo_indptr, Tensor seq_lens_k, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(minisgl, CPU, m) { m.impl("paged_attention", &paged_attention); }
