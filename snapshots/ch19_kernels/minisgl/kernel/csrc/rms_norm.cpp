// RMSNorm 和“残差相加 + RMSNorm”的 CPU 算子（float32）。
//
// torch 写法的一次 RMSNorm 是七八个 aten 算子（转 float、平方、求均值、加 eps、rsqrt、乘、乘 weight），
// 每个都要分派一次、把整行读写一遍；带残差时还多一次加法。这里一行只走一趟：
// 先算 s = x + residual 并写出（它就是下一层的残差），同时累加 s²，再写 s * rsqrt(mean(s²) + eps) * weight。
// 求和顺序和 torch 不同（-ffast-math 允许向量化地重排加法），所以结果和 torch 版差在最后几位，不是逐位相同。
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

namespace {

void check_args(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat,
              "minisgl 的 rms_norm 只支持 float32，收到 ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.numel(), "rms_norm：x 的最后一维是 ", x.size(-1),
              "，weight 却有 ", weight.numel(), " 个数");
}

// 一行 d 个数：out = s / sqrt(mean(s²) + eps) * w
inline void norm_row(const float* s, const float* w, float* out, int64_t d, float eps) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i) sum += s[i] * s[i];
  const float inv = 1.f / std::sqrt(sum / static_cast<float>(d) + eps);
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) out[i] = w[i] * (s[i] * inv);
}

at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  check_args(x_in, weight_in);
  const at::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
  at::Tensor out = at::empty_like(x);
  const int64_t d = x.size(-1), rows = x.numel() / d;
  const float *xp = x.data_ptr<float>(), *wp = weight.data_ptr<float>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) norm_row(xp + r * d, wp, op + r * d, d, static_cast<float>(eps));
  });
  return out;
}

// 返回 (norm(x + residual), x + residual)：后一个是下一次调用的 residual
std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x_in, const at::Tensor& residual_in,
                                                const at::Tensor& weight_in, double eps) {
  check_args(x_in, weight_in);
  TORCH_CHECK(x_in.sizes() == residual_in.sizes() && residual_in.scalar_type() == at::kFloat,
              "add_rms_norm：x 和 residual 的形状、dtype 必须相同");
  const at::Tensor x = x_in.contiguous(), residual = residual_in.contiguous(), weight = weight_in.contiguous();
  at::Tensor out = at::empty_like(x), sum = at::empty_like(x);
  const int64_t d = x.size(-1), rows = x.numel() / d;
  const float *xp = x.data_ptr<float>(), *rp = residual.data_ptr<float>(), *wp = weight.data_ptr<float>();
  float *op = out.data_ptr<float>(), *sp = sum.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* s = sp + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) s[i] = xp[r * d + i] + rp[r * d + i];
      norm_row(s, wp, op + r * d, d, static_cast<float>(eps));
    }
  });
  return {out, sum};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(minisgl, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(minisgl, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("add_rms_norm", &add_rms_norm);
}
