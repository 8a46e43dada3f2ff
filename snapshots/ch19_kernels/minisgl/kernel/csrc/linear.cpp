// 小批量线性层 y = x @ W.T 的 CPU 算子：decode 时 x 只有几行，时间全花在把权重从内存读进来上。
//
// 权重 W 形状 [N, K]，按行存。输出 y[:, n] 只要 W 的第 n 行：一组 32 个地读，和 x 的 M 行各乘加一次。
// 每个权重只从内存读一次；N 行分给 torch 的线程池，几个核一起用内存带宽。
//   float32：一组 32 个 float 直接和 x 乘加。
//   int8 / int4：权重按 32 个一组量化（int8：w = d·q，q ∈ [-127, 127]；int4：w = d·q + m，q ∈ [0, 15]），
//     x 也按同样的 32 个一组量化成 int8（每组一个缩放 dx）：一组的点积 Σ q·xq 全是整数乘加，
//     最后乘一次 d·dx。整数乘加的循环，编译器在有 VNNI 的 CPU 上编成 vpdpbusd：一条指令做 32 对
//     u8 × s8 的乘加——这是权重读得少之后，解包还能跟上内存带宽的原因（llama.cpp 的 Q4_1 × Q8_1 也这样算）。
//     int4 一行 K 个数装进 K/2 个字节：第 j 个字节的低 4 位是第 j 个数、高 4 位是第 j + K/2 个数。
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)  // -march=native 在有 VNNI 的 CPU 上定义这两个宏
#include <immintrin.h>
#define MINISGL_VNNI 1
#endif

namespace {

constexpr int64_t kGroup = 32;  // 量化分组的大小
constexpr int64_t kMaxRows = 8;  // x 最多几行：更多行时矩阵乘是算力活，交给 torch 的 GEMM

// float32 权重：每行 x 一个 32 宽的累加器，每组只做逐元素的乘加（向量指令），整行做完才横向求和一次
at::Tensor gemv_f32(const at::Tensor& x, const float* w, int64_t N) {
  const int64_t M = x.size(0), K = x.size(1);
  at::Tensor y = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float acc[kMaxRows][kGroup] = {};
      for (int64_t g = 0; g < K / kGroup; ++g) {
        const float* wg = w + n * K + g * kGroup;
        for (int64_t i = 0; i < M; ++i) {
          const float* xg = xp + i * K + g * kGroup;
#pragma omp simd
          for (int64_t t = 0; t < kGroup; ++t) acc[i][t] += xg[t] * wg[t];
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

// x 按 32 个一组量化成 int8：dx = 组内最大绝对值 / 127，xq = round(x / dx)。
// 还记下每组的 Σ xq（int4 的 m 项、int8 的 +128 修正要它）。只有 M ≤ 8 行，这一步相对读权重可以忽略。
struct QuantizedX {
  int64_t K, G;
  std::vector<int8_t> q;    // [M, K]
  std::vector<float> scale;  // [M, K/32]
  std::vector<int32_t> sum;  // [M, K/32]

  explicit QuantizedX(const at::Tensor& x) : K(x.size(1)), G(x.size(1) / kGroup) {
    const int64_t M = x.size(0);
    q.resize(M * K), scale.resize(M * G), sum.resize(M * G);
    const float* xp = x.data_ptr<float>();
    for (int64_t i = 0; i < M * G; ++i) {  // 第 i 组 = 第 i / G 行的第 i % G 组（行是连续的）
      const float* v = xp + i * kGroup;
      float amax = 0.f;
      for (int64_t t = 0; t < kGroup; ++t) amax = std::max(amax, std::fabs(v[t]));
      const float d = amax * (1.0f / 127.0f), inv = d > 0.f ? 1.0f / d : 0.f;  // 和 quant.py 的参照同样的算法
      int32_t total = 0;
      for (int64_t t = 0; t < kGroup; ++t) {
        const int8_t r = static_cast<int8_t>(std::nearbyint(v[t] * inv));  // 四舍六入五成双，同 torch.round
        q[i * kGroup + t] = r;
        total += r;
      }
      scale[i] = d, sum[i] = total;
    }
  }
  const int8_t* group(int64_t i, int64_t g) const { return q.data() + i * K + g * kGroup; }
};

// 有 AVX-512 VNNI 时，一组 32 对 u8 × s8 的乘加是一条 vpdpbusd（256 位寄存器，8 个 int32，每个是相邻 4 对之和）。
// 下面每一行先用它算，8 个部分和转成 float、乘这一组的缩放、加进 8 个 float 的累加器，整行做完才横向求和一次。
// 没有 VNNI 的机器走后面那段普通的循环：结果相同（整数部分分毫不差，float 只是加法顺序不同），只是慢。
#ifdef MINISGL_VNNI
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// acc += scale · (一组 32 对 w × x 的 8 个部分和)
inline __m256 add_group(__m256 acc, __m256i w_u8, const int8_t* x, float scale) {
  const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w_u8, load32(x));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(scale), acc);
}
#endif

// int8 权重的一行：Σ_g d·dx·Σ_t q·xq。vpdpbusd 要一个无符号的乘数：q 异或 0x80 就是 q + 128 ∈ [1, 255]，
// 多算的 128·Σ xq（整数）乘上这一组的缩放再减掉
struct Int8Rows {
  const int8_t* q;
  const float* scale;  // [N, K / 32]
  int64_t K;
  float row_dot(int64_t n, const QuantizedX& x, int64_t i) const {
    const int64_t G = K / kGroup;
    const int8_t* row = q + n * K;
    const float* d = scale + n * G;
    const float* dx = x.scale.data() + i * G;
    const int32_t* sx = x.sum.data() + i * G;
    const int8_t* xr = x.group(i, 0);
    float total = 0.f;
#ifdef MINISGL_VNNI
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; ++g)
      acc = add_group(acc, _mm256_xor_si256(load32(row + g * kGroup), flip), xr + g * kGroup, d[g] * dx[g]);
    total = horizontal_sum(acc);
    for (int64_t g = 0; g < G; ++g) total -= d[g] * dx[g] * static_cast<float>(128 * sx[g]);
#else
    for (int64_t g = 0; g < G; ++g) {
      int32_t s = 0;
      for (int64_t t = 0; t < kGroup; ++t) s += static_cast<int32_t>(row[g * kGroup + t]) * xr[g * kGroup + t];
      total += d[g] * dx[g] * static_cast<float>(s);
    }
#endif
    return total;
  }
};

// int4 权重的一行：Σ_g (d·q + m)·dx·xq = Σ_g d·dx·Σ_t q·xq + Σ_g m·dx·Σ_t xq。
// 同一段 32 个字节的低 4 位是第 g 组、高 4 位是第 g + G/2 组：读一次，两组都算
struct Int4Rows {
  const uint8_t* q;    // [N, K / 2]
  const float* scale;  // [N, K / 32]
  const float* minv;   // [N, K / 32]
  int64_t K;
  float row_dot(int64_t n, const QuantizedX& x, int64_t i) const {
    const int64_t G = K / kGroup, half = G / 2;
    const uint8_t* row = q + n * (K / 2);
    const float* d = scale + n * G;
    const float* m = minv + n * G;
    const float* dx = x.scale.data() + i * G;
    const int32_t* sx = x.sum.data() + i * G;
    const int8_t* xr = x.group(i, 0);
    float total = 0.f;
    for (int64_t g = 0; g < G; ++g) total += m[g] * dx[g] * static_cast<float>(sx[g]);  // m 项
#ifdef MINISGL_VNNI
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < half; ++g) {
      const __m256i b = load32(row + g * kGroup);
      acc = add_group(acc, _mm256_and_si256(b, low4), xr + g * kGroup, d[g] * dx[g]);
      acc = add_group(acc, _mm256_and_si256(_mm256_srli_epi16(b, 4), low4), xr + (g + half) * kGroup,
                      d[g + half] * dx[g + half]);
    }
    total += horizontal_sum(acc);
#else
    for (int64_t g = 0; g < half; ++g) {
      const uint8_t* b = row + g * kGroup;
      int32_t lo = 0, hi = 0;
      for (int64_t t = 0; t < kGroup; ++t) {
        lo += static_cast<int32_t>(b[t] & 0xF) * xr[g * kGroup + t];
        hi += static_cast<int32_t>(b[t] >> 4) * xr[(g + half) * kGroup + t];
      }
      total += d[g] * dx[g] * static_cast<float>(lo) + d[g + half] * dx[g + half] * static_cast<float>(hi);
    }
#endif
    return total;
  }
};

template <typename Rows>
at::Tensor gemv_quantized(const at::Tensor& x, const Rows& rows, int64_t N) {
  const int64_t M = x.size(0);
  const QuantizedX xq(x);
  at::Tensor y = at::empty({M, N}, x.options());
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t i = 0; i < M; ++i) yp[i * N + n] = rows.row_dot(n, xq, i);  // 这一行权重刚读进缓存，M 行 x 都用它
  });
  return y;
}

at::Tensor check_x(const at::Tensor& x, int64_t K) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x 必须是 float32 的 [M, K]");
  TORCH_CHECK(x.size(1) == K, "x 有 ", x.size(1), " 列，权重要 ", K, " 列");
  TORCH_CHECK(x.size(0) <= kMaxRows, "x 最多 ", kMaxRows, " 行，收到 ", x.size(0));
  return x.contiguous();
}

at::Tensor linear_f32(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kFloat && w.is_contiguous(), "w 必须是连续的 float32 [N, K]");
  TORCH_CHECK(w.size(1) % kGroup == 0, "K 必须是 32 的倍数，收到 ", w.size(1));
  return gemv_f32(check_x(x, w.size(1)), w.data_ptr<float>(), w.size(0));
}

at::Tensor linear_int8(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale) {
  TORCH_CHECK(q.dim() == 2 && q.scalar_type() == at::kChar && q.is_contiguous(), "q 必须是连续的 int8 [N, K]");
  const int64_t N = q.size(0), K = q.size(1);
  TORCH_CHECK(K % kGroup == 0 && scale.is_contiguous() && scale.numel() == N * (K / kGroup), "scale 必须是 [N, K/32]");
  return gemv_quantized(check_x(x, K), Int8Rows{q.data_ptr<int8_t>(), scale.data_ptr<float>(), K}, N);
}

at::Tensor linear_int4(const at::Tensor& x, const at::Tensor& q, const at::Tensor& scale, const at::Tensor& minv) {
  TORCH_CHECK(q.dim() == 2 && q.scalar_type() == at::kByte && q.is_contiguous(), "q 必须是连续的 uint8 [N, K/2]");
  const int64_t N = q.size(0), K = q.size(1) * 2;
  TORCH_CHECK(K % (2 * kGroup) == 0, "int4 的 K 必须是 64 的倍数，收到 ", K);
  TORCH_CHECK(scale.is_contiguous() && scale.numel() == N * (K / kGroup), "scale 必须是 [N, K/32]");
  TORCH_CHECK(minv.is_contiguous() && minv.numel() == N * (K / kGroup), "minv 必须是 [N, K/32]");
  return gemv_quantized(check_x(x, K), Int4Rows{q.data_ptr<uint8_t>(), scale.data_ptr<float>(),
                                                minv.data_ptr<float>(), K}, N);
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
