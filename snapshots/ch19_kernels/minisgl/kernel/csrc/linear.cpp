// 线性层 y = x @ W.T 的 CPU 算子。decode 时 x 只有几行，时间全花在把权重从内存读进来上。
// float32 只接 1～8 行（更多行交给 torch 的 GEMM）；int8 / int4 接任意行数：一块权重读进 L1 之后，
// 对 x 的每 8 行各算一趟，权重只从内存读一次。
//
// float32：权重 W 按行存 [N, K]。一行一行地读，和 x 的 M 行各乘加一次；N 行分给 torch 的线程池。
//   软件预取：读第 k 个数时先让内存把 2 KB 之后的那段送进缓存，读到那里时它已经在了。
// int8 / int4：权重按 32 个一组量化（int8：w = d·q；int4：w = d·q + m），x 也按同样的 32 个一组
//   取整成 int8（每组一个缩放 dx），一组的点积就全是整数乘加，最后乘一次 d·dx。
//   权重在这里是“16 行交错”的存法（quant.py 的 interleave_int8 / interleave_int4 排好）：
//   16 行的第 g 组放在一起，每个 32 位的格子里是“某一行的 4 个相邻的数”，16 行正好占满一个 512 位寄存器。
//   一条 vpdpbusd（AVX-512 VNNI）把 16 个格子各自的 4 对 u8 × s8 乘加进 16 个 int32：16 行同时前进 4 个数，
//   x 的 4 个数广播到每个格子。8 条之后 16 行的第 g 组都做完了，转成 float、乘上 16 行各自的 d·dx，
//   一个寄存器就是 16 个输出的部分和，不用横向求和。
//   一块（16 行 × 一组）在内存里是连续的：权重的格子后面跟着这 16 行的 d（int4 还有 m，都是 float16），
//   整个算子只有一条从头读到尾的字节流，预取最好做。
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

// -march=native 按这台 CPU 定义下面的宏：有 AVX-512 VNNI 用 vpdpbusd；只有 AVX2（多数笔记本）用 vpmaddubsw
// 拼出同样的“4 对 u8 × s8 加进一个 int32”；都没有（比如 ARM）走普通的整数循环
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#include <immintrin.h>
#define MINISGL_VNNI 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define MINISGL_AVX2 1
#endif

namespace {

constexpr int64_t kGroup = 32;     // 量化分组的大小
constexpr int64_t kMaxRows = 8;    // 一次算几行 x：8 行的累加器正好留在寄存器里（float32 最多接 8 行）
constexpr int64_t kLanes = 16;     // 交错存放的行数：一个 512 位寄存器里 16 个 int32
// 软件预取提前多少字节：float32 2 KB、量化的 4 KB（写本章的机器上试出来的；太近来不及，太远会被挤出缓存）
constexpr int64_t kAheadF32 = 2048, kAheadQuantized = 4096;
// 一块（16 行 × 一组）的字节数：权重 + 16 个 float16 的 d（int4 再加 16 个 m）
constexpr int64_t kInt8Block = kLanes * kGroup + kLanes * 2;
constexpr int64_t kInt4Block = kLanes * kGroup / 2 + kLanes * 4;

// float32 权重：M 是编译期常数，M 行的累加器都留在寄存器里；每行 32 个一组逐元素乘加，整行做完才横向求和
template <int M>
void gemv_f32_rows(const float* x, const float* w, float* y, int64_t K, int64_t N, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const float* row = w + n * K;
    float acc[M][kGroup] = {};
    for (int64_t k = 0; k < K; k += kGroup) {
      __builtin_prefetch(reinterpret_cast<const char*>(row + k) + kAheadF32);  // 一组 128 字节 = 两条缓存行
      __builtin_prefetch(reinterpret_cast<const char*>(row + k) + kAheadF32 + 64);
      for (int i = 0; i < M; ++i) {
#pragma omp simd
        for (int64_t t = 0; t < kGroup; ++t) acc[i][t] += x[i * K + k + t] * row[k + t];
      }
    }
    for (int i = 0; i < M; ++i) {
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t t = 0; t < kGroup; ++t) dot += acc[i][t];
      y[i * N + n] = dot;
    }
  }
}

// 把运行时的行数 M 换成编译期常数：调用 F<1> … F<8> 之一
template <template <int> class F, typename... Args>
void dispatch_rows(int64_t M, Args&&... args) {
  switch (M) {
    case 1: F<1>::run(args...); break;
    case 2: F<2>::run(args...); break;
    case 3: F<3>::run(args...); break;
    case 4: F<4>::run(args...); break;
    case 5: F<5>::run(args...); break;
    case 6: F<6>::run(args...); break;
    case 7: F<7>::run(args...); break;
    default: F<8>::run(args...); break;
  }
}

template <int M>
struct GemvF32 {
  static void run(const float* x, const float* w, float* y, int64_t K, int64_t N) {
    at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) { gemv_f32_rows<M>(x, w, y, K, N, n0, n1); });
  }
};

// x 按 32 个一组量化成 int8：dx = 组内最大绝对值 / 127，xq = round(x / dx)。
// 还记下每组的 Σ xq（int8 的 +128 修正、int4 的 m 项要它）。每个 x 只取整一次，再和整层权重相乘。
struct QuantizedX {
  int64_t M, K, G;
  std::vector<int8_t> q;     // [M, K]
  std::vector<float> scale;  // [M, G]
  std::vector<int32_t> sum;  // [M, G]

  explicit QuantizedX(const at::Tensor& x) : M(x.size(0)), K(x.size(1)), G(x.size(1) / kGroup) {
    q.resize(M * K), scale.resize(M * G), sum.resize(M * G);
    const float* xp = x.data_ptr<float>();
    // 第 i 组 = 第 i / G 行的第 i % G 组（行是连续的）；prefill 时几百行，分给线程池
    at::parallel_for(0, M * G, 256, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
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
    });
  }
  const int8_t* group(int64_t i, int64_t g) const { return q.data() + i * K + g * kGroup; }
};

// 一块 16 行：y[i, 16 行] = Σ_g d·dx·Σ_t q·xq（int4 再加 Σ_g m·dx·Σ_t xq）。
// int8 的一块：512 字节的权重，第 s 段 64 字节（s = 0..7）的第 j 个 32 位格子 = 第 j 行这一组的第 4s..4s+3 个数；
// 然后 16 个 d。int4 的一块：256 字节，第 s 段（s = 0..3）第 j 个格子的 4 个字节，低 4 位是第 j 行的
// 第 4s..4s+3 个数、高 4 位是第 16+4s..16+4s+3 个数；然后 16 个 d、16 个 m。
#ifdef MINISGL_VNNI
inline __m512i broadcast4(const int8_t* p) { return _mm512_set1_epi32(*reinterpret_cast<const int32_t*>(p)); }
inline __m512 load_halves(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// vpdpbusd 要一个无符号的乘数：int8 的 q 异或 0x80 就是 q + 128 ∈ [1, 255]，多算的 128·Σ xq 在整数里减掉
template <int M>
void int8_block(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < x.G; ++g, block += kInt8Block) {
    for (int64_t c = 0; c < kInt8Block; c += 64) _mm_prefetch(reinterpret_cast<const char*>(block) + kAheadQuantized + c, _MM_HINT_T0);
    __m512i dot[M];
    for (int i = 0; i < M; ++i) dot[i] = _mm512_set1_epi32(-128 * x.sum[(row0 + i) * x.G + g]);
    for (int s = 0; s < 8; ++s) {
      const __m512i w = _mm512_xor_si512(_mm512_loadu_si512(block + 64 * s), flip);
      for (int i = 0; i < M; ++i) dot[i] = _mm512_dpbusd_epi32(dot[i], w, broadcast4(x.group(row0 + i, g) + 4 * s));
    }
    const __m512 d = load_halves(block + kLanes * kGroup);
    for (int i = 0; i < M; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i]), _mm512_mul_ps(d, _mm512_set1_ps(x.scale[(row0 + i) * x.G + g])), acc[i]);
  }
  for (int i = 0; i < M; ++i) _mm512_storeu_ps(y + i * N, acc[i]);
}

template <int M>
void int4_block(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < x.G; ++g, block += kInt4Block) {
    for (int64_t c = 0; c < kInt4Block; c += 64) _mm_prefetch(reinterpret_cast<const char*>(block) + kAheadQuantized + c, _MM_HINT_T0);
    __m512i lo[4], hi[4];  // 16 行这一组的 32 个数：lo[s] 是第 4s..4s+3 个，hi[s] 是第 16+4s..16+4s+3 个
    for (int s = 0; s < 4; ++s) {
      const __m512i b = _mm512_loadu_si512(block + 64 * s);
      lo[s] = _mm512_and_si512(b, low4);
      hi[s] = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
    }
    const __m512 d = load_halves(block + kLanes * kGroup / 2), m = load_halves(block + kLanes * kGroup / 2 + 32);
    for (int i = 0; i < M; ++i) {
      const int8_t* xg = x.group(row0 + i, g);
      __m512i dot_lo = _mm512_setzero_si512(), dot_hi = _mm512_setzero_si512();  // 两条链：相邻的乘加不互相等
      for (int s = 0; s < 4; ++s) {
        dot_lo = _mm512_dpbusd_epi32(dot_lo, lo[s], broadcast4(xg + 4 * s));
        dot_hi = _mm512_dpbusd_epi32(dot_hi, hi[s], broadcast4(xg + 16 + 4 * s));
      }
      const float dx = x.scale[(row0 + i) * x.G + g];
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(dot_lo, dot_hi));
      acc[i] = _mm512_fmadd_ps(dot, _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[i]);
      acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(dx * static_cast<float>(x.sum[(row0 + i) * x.G + g])), acc[i]);  // m 项
    }
  }
  for (int i = 0; i < M; ++i) _mm512_storeu_ps(y + i * N, acc[i]);
}
#elif defined(MINISGL_AVX2)
// 只有 AVX2：一个 256 位寄存器装 8 行的格子，16 行分两半（h = 0、1）。没有 vpdpbusd，用两条指令拼：
// vpmaddubsw 把相邻两对 u8 × s8 加成 int16，vpmaddwd 乘 1 再把相邻两个 int16 加成 int32。
// vpmaddubsw 的 int16 会饱和，所以无符号的那一方要小：int4 的 q ≤ 15；int8 用 |q| 和“带上 q 的符号的 x”，
// |q|·|x| ≤ 128·127，两对相加也放得下，也就不用 +128 的修正
inline __m256i broadcast4(const int8_t* p) { return _mm256_set1_epi32(*reinterpret_cast<const int32_t*>(p)); }
inline __m256 load_halves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i dot4(__m256i acc, __m256i w_unsigned, __m256i x_signed) {
  const __m256i pairs = _mm256_maddubs_epi16(w_unsigned, x_signed);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

template <int M>
void int8_block(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
  __m256 acc[M][2];
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < x.G; ++g, block += kInt8Block) {
    for (int64_t c = 0; c < kInt8Block; c += 64) _mm_prefetch(reinterpret_cast<const char*>(block) + kAheadQuantized + c, _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      __m256i dot[M];
      for (int i = 0; i < M; ++i) dot[i] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * s + 32 * h));
        const __m256i w_abs = _mm256_sign_epi8(w, w);
        for (int i = 0; i < M; ++i)
          dot[i] = dot4(dot[i], w_abs, _mm256_sign_epi8(broadcast4(x.group(row0 + i, g) + 4 * s), w));
      }
      const __m256 d = load_halves(block + kLanes * kGroup + 16 * h);
      for (int i = 0; i < M; ++i)
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i]), _mm256_mul_ps(d, _mm256_set1_ps(x.scale[(row0 + i) * x.G + g])), acc[i][h]);
    }
  }
  for (int i = 0; i < M; ++i) _mm256_storeu_ps(y + i * N, acc[i][0]), _mm256_storeu_ps(y + i * N + 8, acc[i][1]);
}

template <int M>
void int4_block(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[M][2];
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < x.G; ++g, block += kInt4Block) {
    for (int64_t c = 0; c < kInt4Block; c += 64) _mm_prefetch(reinterpret_cast<const char*>(block) + kAheadQuantized + c, _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      __m256i lo[4], hi[4];
      for (int s = 0; s < 4; ++s) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * s + 32 * h));
        lo[s] = _mm256_and_si256(b, low4);
        hi[s] = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
      }
      const __m256 d = load_halves(block + kLanes * kGroup / 2 + 16 * h);
      const __m256 m = load_halves(block + kLanes * kGroup / 2 + 32 + 16 * h);
      for (int i = 0; i < M; ++i) {
        const int8_t* xg = x.group(row0 + i, g);
        __m256i dot = _mm256_setzero_si256();
        for (int s = 0; s < 4; ++s) {
          dot = dot4(dot, lo[s], broadcast4(xg + 4 * s));
          dot = dot4(dot, hi[s], broadcast4(xg + 16 + 4 * s));
        }
        const float dx = x.scale[(row0 + i) * x.G + g];
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[i][h]);
        acc[i][h] = _mm256_fmadd_ps(m, _mm256_set1_ps(dx * static_cast<float>(x.sum[(row0 + i) * x.G + g])), acc[i][h]);
      }
    }
  }
  for (int i = 0; i < M; ++i) _mm256_storeu_ps(y + i * N, acc[i][0]), _mm256_storeu_ps(y + i * N + 8, acc[i][1]);
}
#else
// 既没有 AVX-512 VNNI 也没有 AVX2 的机器：同样的块，普通的整数循环。整数部分分毫不差，float 只是加法顺序不同，只是慢
inline float half_to_float(const uint8_t* p, int64_t lane) {
  return static_cast<float>(reinterpret_cast<const at::Half*>(p)[lane]);
}

template <int M>
void int8_block(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
  float acc[M][kLanes] = {};
  for (int64_t g = 0; g < x.G; ++g, block += kInt8Block) {
    const int8_t* q = reinterpret_cast<const int8_t*>(block);
    for (int64_t j = 0; j < kLanes; ++j) {
      const float d = half_to_float(block + kLanes * kGroup, j);
      for (int i = 0; i < M; ++i) {
        const int8_t* xg = x.group(row0 + i, g);
        int32_t dot = 0;
        for (int s = 0; s < 8; ++s)
          for (int b = 0; b < 4; ++b) dot += static_cast<int32_t>(q[64 * s + 4 * j + b]) * xg[4 * s + b];
        acc[i][j] += d * x.scale[(row0 + i) * x.G + g] * static_cast<float>(dot);
      }
    }
  }
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < kLanes; ++j) y[i * N + j] = acc[i][j];
}

template <int M>
void int4_block(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
  float acc[M][kLanes] = {};
  for (int64_t g = 0; g < x.G; ++g, block += kInt4Block) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const float d = half_to_float(block + kLanes * kGroup / 2, j);
      const float m = half_to_float(block + kLanes * kGroup / 2 + 32, j);
      for (int i = 0; i < M; ++i) {
        const int8_t* xg = x.group(row0 + i, g);
        int32_t dot = 0;
        for (int s = 0; s < 4; ++s)
          for (int b = 0; b < 4; ++b) {
            const uint8_t byte = block[64 * s + 4 * j + b];
            dot += static_cast<int32_t>(byte & 0xF) * xg[4 * s + b] + static_cast<int32_t>(byte >> 4) * xg[16 + 4 * s + b];
          }
        const float dx = x.scale[(row0 + i) * x.G + g];
        acc[i][j] += d * dx * static_cast<float>(dot) + m * dx * static_cast<float>(x.sum[(row0 + i) * x.G + g]);
      }
    }
  }
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < kLanes; ++j) y[i * N + j] = acc[i][j];
}
#endif

template <int M>
struct Int8Rows {
  static void run(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
    int8_block<M>(block, x, row0, y + row0 * N, N);
  }
};

template <int M>
struct Int4Rows {
  static void run(const uint8_t* block, const QuantizedX& x, int64_t row0, float* y, int64_t N) {
    int4_block<M>(block, x, row0, y + row0 * N, N);
  }
};

// 一块（16 行权重）乘 x 的全部行，每趟 8 行。第一趟从内存读进这块，之后几趟它还在 L1 里（K = 1536 时 int4 一块
// 15 KB、int8 26 KB），所以 prefill 的几百行也只从内存读一遍权重；块分给线程池
template <template <int> class Rows>
void all_blocks(const uint8_t* blocks, int64_t block_bytes, const QuantizedX& x, float* y, int64_t NB, int64_t N) {
  at::parallel_for(0, NB, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = 0; r < x.M; r += kMaxRows)
        dispatch_rows<Rows>(std::min(kMaxRows, x.M - r), blocks + b * x.G * block_bytes, x, r, y + b * kLanes, N);
  });
}

at::Tensor check_x(const at::Tensor& x, int64_t K) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x 必须是 float32 的 [M, K]");
  TORCH_CHECK(x.size(1) == K, "x 有 ", x.size(1), " 列，权重要 ", K, " 列");
  TORCH_CHECK(x.size(0) >= 1, "x 至少要有 1 行");
  return x.contiguous();
}

at::Tensor linear_f32(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kFloat && w.is_contiguous(), "w 必须是连续的 float32 [N, K]");
  TORCH_CHECK(w.size(1) % kGroup == 0, "K 必须是 32 的倍数，收到 ", w.size(1));
  const at::Tensor xc = check_x(x, w.size(1));
  // float32 的行再多就是算力活（每个权重乘很多行），交给 torch 的 GEMM
  TORCH_CHECK(xc.size(0) <= kMaxRows, "x 要有 1 到 ", kMaxRows, " 行，收到 ", xc.size(0));
  at::Tensor y = at::empty({xc.size(0), w.size(0)}, xc.options());
  dispatch_rows<GemvF32>(xc.size(0), xc.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), w.size(1),
                         w.size(0));
  return y;
}

// 交错存放的权重：uint8 的 [ceil(N/16), K/32, 每块的字节数]；N 是真正的行数（最后一块可能补了 0 行）
template <template <int> class Rows>
at::Tensor linear_blocks(const at::Tensor& x, const at::Tensor& blocks, int64_t N, int64_t block_bytes) {
  TORCH_CHECK(blocks.dim() == 3 && blocks.scalar_type() == at::kByte && blocks.is_contiguous() &&
                  blocks.size(2) == block_bytes,
              "blocks 必须是连续的 uint8 [ceil(N/16), K/32, ", block_bytes, "]");
  const int64_t NB = blocks.size(0);
  TORCH_CHECK(N > (NB - 1) * kLanes && N <= NB * kLanes, "N = ", N, " 和 ", NB, " 块（每块 16 行）对不上");
  const QuantizedX xq(check_x(x, blocks.size(1) * kGroup));
  at::Tensor y = at::empty({x.size(0), NB * kLanes}, x.options());  // 每块写满 16 个输出，多出的列最后切掉
  all_blocks<Rows>(blocks.data_ptr<uint8_t>(), block_bytes, xq, y.data_ptr<float>(), NB, NB * kLanes);
  return NB * kLanes == N ? y : y.narrow(1, 0, N).contiguous();
}

at::Tensor linear_int8(const at::Tensor& x, const at::Tensor& blocks, int64_t N) {
  return linear_blocks<Int8Rows>(x, blocks, N, kInt8Block);
}

at::Tensor linear_int4(const at::Tensor& x, const at::Tensor& blocks, int64_t N) {
  return linear_blocks<Int4Rows>(x, blocks, N, kInt4Block);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(minisgl, m) {
  m.def("linear_f32(Tensor x, Tensor w) -> Tensor");
  m.def("linear_int8(Tensor x, Tensor blocks, int n) -> Tensor");
  m.def("linear_int4(Tensor x, Tensor blocks, int n) -> Tensor");
}

TORCH_LIBRARY_IMPL(minisgl, CPU, m) {
  m.impl("linear_f32", &linear_f32);
  m.impl("linear_int8", &linear_int8);
  m.impl("linear_int4", &linear_int4);
}
