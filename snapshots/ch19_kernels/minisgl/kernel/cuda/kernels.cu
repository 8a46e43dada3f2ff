// 本章三个小算子的 CUDA 版本：rms_norm、add_rms_norm、store_kv（签名与 CPU 版相同，登记在 CUDA 这个分派键上）。
//
// 线性层没有 CUDA 版：GPU 上 decode 的线性层交给 cuBLAS（F.linear），和上游一样；本章的小批量 GEMV、
// 量化是为 CPU 的内存带宽写的。这个文件只在有 CUDA 的机器上编译（minisgl.kernel.load_cuda_kernels），
// examples/gpu_smoke.py 第 8 节编它、和 torch 写法比结果。
//
// RMSNorm：一行一个线程块。先各线程累加自己那几列的平方（float 累加，半精度的输入也一样），
// warp 内用 __shfl_xor_sync 求和，各 warp 的部分和经共享内存再求一次，得到整行的均值；再各自写出结果。
// store_kv：一个 token 一个线程块，整行按字节拷到池子里 out_loc[i] 号槽位（不看 dtype，和 CPU 版一样）。
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <tuple>

namespace {

constexpr int kThreads = 256;  // 一行 576～4096 个数：256 个线程各管几列

__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.f;
  if (warp == 0)
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

// residual 为 nullptr：out = norm(x)；否则 sum = x + residual 写出，out = norm(sum)
template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* residual, const T* weight, T* out, T* sum, int64_t d,
                                float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * d;
  float squares = 0.f;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) {
    float s = static_cast<float>(xr[i]);
    if (residual != nullptr) {
      s += static_cast<float>(residual[row * d + i]);
      sum[row * d + i] = static_cast<T>(s);  // 下一层的残差按输入的 dtype 存，和 torch 写法一样
      s = static_cast<float>(sum[row * d + i]);
    }
    squares += s * s;
  }
  const float inv = rsqrtf(block_sum(squares) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += kThreads) {
    const float s = static_cast<float>(residual != nullptr ? sum[row * d + i] : xr[i]);
    out[row * d + i] = static_cast<T>(static_cast<float>(weight[i]) * (s * inv));
  }
}

void check_args(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.is_cuda() && weight.device() == x.device(), "rms_norm：x 和 weight 要在同一块 GPU 上");
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "rms_norm：x 和 weight 的 dtype 要相同");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.numel(), "rms_norm：x 的最后一维是 ", x.size(-1),
              "，weight 却有 ", weight.numel(), " 个数");
}

std::tuple<at::Tensor, at::Tensor> launch_norm(const at::Tensor& x_in, const at::Tensor* residual_in,
                                               const at::Tensor& weight_in, double eps) {
  check_args(x_in, weight_in);
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
  const at::Tensor residual = residual_in != nullptr ? residual_in->contiguous() : at::Tensor();
  at::Tensor out = at::empty_like(x);
  at::Tensor sum = residual_in != nullptr ? at::empty_like(x) : at::Tensor();
  const int64_t d = x.size(-1), rows = x.numel() / d;
  if (rows == 0) return {out, sum};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "minisgl_rms_norm", [&] {
    rms_norm_kernel<scalar_t><<<rows, kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(), residual_in != nullptr ? residual.data_ptr<scalar_t>() : nullptr,
        weight.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
        residual_in != nullptr ? sum.data_ptr<scalar_t>() : nullptr, d, static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, sum};
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return std::get<0>(launch_norm(x, nullptr, weight, eps));
}

std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.sizes() == residual.sizes() && residual.scalar_type() == x.scalar_type() &&
                  residual.device() == x.device(),
              "add_rms_norm：x 和 residual 的形状、dtype、设备必须相同");
  return launch_norm(x, &residual, weight, eps);
}

// 第 i 个线程块把第 i 个 token 的一行（row_bytes 个字节）拷到 dst 的 slots[i] 号槽位
template <typename Index>
__global__ void copy_rows_kernel(char* dst, const char* src, const Index* slots, int64_t num_slots,
                                 int64_t row_bytes, int64_t dst_stride, int64_t src_stride) {
  const int64_t slot = static_cast<int64_t>(slots[blockIdx.x]);
  CUDA_KERNEL_ASSERT(0 <= slot && slot < num_slots);  // 越界是调用方的错：设备端断言，这块 GPU 上下文随之报错
  const char* from = src + blockIdx.x * src_stride;
  char* to = dst + slot * dst_stride;
  for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) to[b] = from[b];
}

void copy_rows(at::Tensor pool, const at::Tensor& src_in, const at::Tensor& slots, cudaStream_t stream) {
  const at::Tensor src = src_in.stride(2) == 1 && src_in.stride(1) == src_in.size(2) ? src_in : src_in.contiguous();
  TORCH_CHECK(pool.stride(2) == 1 && pool.stride(1) == pool.size(2), "KV 池的每个槽位必须是连续的一块");
  const int64_t n = slots.numel();
  const int64_t row_bytes = src.size(1) * src.size(2) * src.element_size();
  char* dst = static_cast<char*>(pool.data_ptr());
  const char* from = static_cast<const char*>(src.data_ptr());
  const int64_t dst_stride = pool.stride(0) * pool.element_size(), src_stride = src.stride(0) * src.element_size();
  if (slots.scalar_type() == at::kInt) {
    copy_rows_kernel<<<n, 128, 0, stream>>>(dst, from, slots.data_ptr<int32_t>(), pool.size(0), row_bytes,
                                            dst_stride, src_stride);
  } else {
    copy_rows_kernel<<<n, 128, 0, stream>>>(dst, from, slots.data_ptr<int64_t>(), pool.size(0), row_bytes,
                                            dst_stride, src_stride);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void store_kv(at::Tensor kv_buffer, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out_loc,
              int64_t layer_id) {
  TORCH_CHECK(k.scalar_type() == kv_buffer.scalar_type() && v.scalar_type() == kv_buffer.scalar_type(),
              "K、V 的 dtype 要和池子一样");
  TORCH_CHECK(out_loc.device() == kv_buffer.device() && k.device() == kv_buffer.device(),
              "store_kv：池子、K/V、out_loc 要在同一块 GPU 上");
  TORCH_CHECK(out_loc.scalar_type() == at::kInt || out_loc.scalar_type() == at::kLong, "out_loc 要是整数");
  const int64_t n = out_loc.numel();
  TORCH_CHECK(k.dim() == 3 && k.size(0) == n && v.sizes() == k.sizes(), "k、v 必须是 [len(out_loc), 头数, head_dim]");
  if (n == 0) return;
  const c10::cuda::CUDAGuard guard(kv_buffer.device());
  const at::Tensor slots = out_loc.contiguous();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  copy_rows(kv_buffer[0][layer_id], k, slots, stream);
  copy_rows(kv_buffer[1][layer_id], v, slots, stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(minisgl, CUDA, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("add_rms_norm", &add_rms_norm);
  m.impl("store_kv", &store_kv);
}
