// 小批量线性层 y = x @ W.T 的 CPU 算子：decode 时 x 只有几行，时间全花在把权重从内存读进来上。
//
// 权重 W 形状 [N, K]，按行存。输出 y[:, n] 只要 W 的第 n 行：一组 32 个地读，解成 float（在寄存器里），
// 和 x 的 M 行各乘加一次。每个权重只从内存读一次；N 行分给 torch 的线程池，几个核一起用内存带宽。
// 三种权重存法共用这一套循环，只是“一组怎么变成 32 个 float”不同：
//   float32：直接用；
//   int8：每 32 个数一组，一个 float 缩放 d，w = d * q，q ∈ [-127, 127]；
//   int4：每 32 个数一组，缩放 d 和最小值 m，w = d * q + m，q ∈ [0, 15]。
//         一行 K 个数装进 K/2 个字节：第 j 个字节的低 4 位是第 j 个数、高 4 位是第 j + K/2 个数。
//         （llama.cpp 的 Q4_1 在每组 16 个字节里排；我们这样排，解一组就是对连续 32 个字节做同一种位运算）
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

namespace {

constexpr int64_t kGroup = 32;  // 量化分组的大小

struct Float32Rows {
  const float* w;
  int64_t K;
  const float* group(int64_t n, int64_t g, float*) const { return w + n * K + g * kGroup; }  // 不用解
};

struct Int8Rows {
  const int8_t* q;
  const float* scale;  // [N, K / 32]
  int64_t K;
  const float* group(int64_t n, int64_t g, float* out) const {
    const int8_t* b = q + n * K + g * kGroup;
    const float d = scale[n * (K / kGroup) + g];
#pragma omp simd
    for (int64_t t = 0; t < kGroup; ++t) out[t] = d * static_cast<float>(b[t]);
    return out;
  }
};

struct Int4Rows {
  const uint8_t* q;    // [N, K / 2]：第 j 个字节的低 4 位是第 j 个数，高 4 位是第 j + K/2 个数
  const float* scale;  // [N, K / 32]
  const float* minv;   // [N, K / 32]
  int64_t K;
  const float* group(int64_t n, int64_t g, float* out) const {
    const int64_t half = K / kGroup / 2;  // 前一半的组在低 4 位里，后一半的组在高 4 位里
    const uint8_t* b = q + n * (K / 2) + (g % half) * kGroup;
    const float d = scale[n * (K / kGroup) + g], m = minv[n * (K / kGroup) + g];
    if (g < half) {
#pragma omp simd
      for (int64_t t = 0; t < kGroup; ++t) out[t] = d * static_cast<float>(b[t] & 0xF) + m;
    } else {
#pragma omp simd
      for (int64_t t = 0; t < kGroup; ++t) out[t] = d * static_cast<float>(b[t] >> 4) + m;
    }
    return out;
  }
};

constexpr int64_t kMaxRows = 8;  // x 最多几行：更多行时矩阵乘是算力活，交给 torch 的 GEMM

template <typename Rows>
at::Tensor gemv(const at::Tensor& x_in, const Rows& rows, int64_t N) {
  const at::Tensor x = x_in.contiguous();
  const int64_t M = x.size(0), K = x.size(1);
  TORCH_CHECK(M <= kMaxRows, "x 最多 ", kMaxRows, " 行，收到 ", M);
  at::Tensor y = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      // 每行 x 一个 32 宽的累加器：每组只做逐元素的乘加（向量指令），整行做完才横向求和一次
      float acc[kMaxRows][kGroup] = {};
      float tmp[kGroup];
      for (int64_t g = 0; g < K / kGroup; ++g) {
        const float* w = rows.group(n, g, tmp);  // 这一组 32 个权重，解成 float
        for (int64_t i = 0; i < M; ++i) {
          const float* xg = xp + i * K + g * kGroup;
#pragma omp simd
          for (int64_t t = 0; t < kGroup; ++t) acc[i][t] += xg[t] * w[t];
        }
      }
      for (int64_t i = 0; i < M; ++i) {
        float dot = 0.f;
#pragma omp simd reduction(+ : dot)
        for (int64_t t = 0; t < kGroup; ++t) dot += acc[i][t];
        yp[i * N + n] = dot;
      }
    }
  });
  return y;
}

void check_x(const at::Tensor& x, int64_t K) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x 必须是 float32 的 [M, K]");
  TORCH_CHECK(x.size(1) == K, "x 有 ", x.size(1), " 列，权重要 ", K, " 列");
}

at::Tensor linear_f32(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kFloat && w.is_contiguous(), "w 必须是连续的 float32 [N, K]");
  TORCH_CHECK(w.size(1) % kGroup == 0, "K 必须是 32 的倍数，收到 ", w.size(1));
  check_x(x, w.size(1));
  return gemv(x, Float32Rows{w.data_ptr<float>(), w.size(1)}, w.size(0));
}

at::Tensor linear_int8(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale) {
  TORCH_CHECK(q.dim() == 2 && q.scalar_type() == at::kChar && q.is_contiguous(), "q 必须是连续的 int8 [N, K]");
  const int64_t N = q.size(0), K = q.size(1);
  TORCH_CHECK(K % kGroup == 0 && scale.is_contiguous() && scale.numel() == N * (K / kGroup), "scale 必须是 [N, K/32]");
  check_x(x, K);
  return gemv(x, Int8Rows{q.data_ptr<int8_t>(), scale.data_ptr<float>(), K}, N);
}

at::Tensor linear_int4(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, const at::Tensor& minv) {
  TORCH_CHECK(q.dim() == 2 && q.scalar_type() == at::kByte && q.is_contiguous(), "q 必须是连续的 uint8 [N, K/2]");
  const int64_t N = q.size(0), K = q.size(1) * 2;
  TORCH_CHECK(K % (2 * kGroup) == 0, "int4 的 K 必须是 64 的倍数，收到 ", K);
  TORCH_CHECK(scale.is_contiguous() && scale.numel() == N * (K / kGroup), "scale 必须是 [N, K/32]");
  TORCH_CHECK(minv.is_contiguous() && minv.numel() == N * (K / kGroup), "minv 必须是 [N, K/32]");
  check_x(x, K);
  return gemv(x, Int4Rows{q.data_ptr<uint8_t>(), scale.data_ptr<float>(), minv.data_ptr<float>(), K}, N);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(minisgl, m) {
  m.def("linear_f32(Tensor x, Tensor w) -> Tensor");
  m.def("linear_int8(Tensor x, Tensor q, Tensor scale) -> Tensor");
  m.def("linear_int4(Tensor x, Tensor q, Tensor scale, Tensor minv) -> Tensor");
}

TORCH_LIBRARY_IMPL(minisgl, CPU, m) {
  m.impl("linear_f32", &linear_f32);
  m.impl("linear_int8", &linear_int8);
  m.impl("linear_int4", &linear_int4);
}
