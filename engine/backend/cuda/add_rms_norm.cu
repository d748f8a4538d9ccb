#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;
// Groups of 4 elements each thread keeps in registers between the two passes: rows of up to
// 4 * 4 * 256 = 4096 elements are read once, with every load of the row issued before the first
// use (one memory latency per row instead of one per element). Longer rows re-read the rest.
constexpr int kRegGroups = 4;

// What block r of a norm kernel works on: residual row s = row_index[r] (or r), x's row s (null
// without x), and whether the sum is written back to the residual (an add without a row gather).
template <typename T>
struct NormRow {
  float* res;
  const T* x;
  bool write_back;
};
template <typename T>
__device__ __forceinline__ NormRow<T> norm_row(float* residual, const T* x,
                                               const int32_t* row_index, int64_t r, int64_t dim) {
  const int64_t s = row_index != nullptr ? row_index[r] : r;
  const T* xr = x != nullptr ? x + s * dim : nullptr;
  return NormRow<T>{residual + s * dim, xr, xr != nullptr && row_index == nullptr};
}

// dim % 4 == 0 and 16-byte aligned rows: float4 loads of the residual, 8-byte loads of x.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm_vec_kernel(float* __restrict__ residual, const T* __restrict__ x,
                            const float* __restrict__ weight, T* __restrict__ out,
                            const int32_t* __restrict__ row_index, int64_t dim, float eps) {
  __shared__ double scratch[32];
  pdl_begin();
  const int64_t r = blockIdx.x;
  const auto [res, xr, write_back] = norm_row(residual, x, row_index, r, dim);
  const int64_t groups = dim / 4;

  float4 h[kRegGroups];
  double ss = 0.0;
#pragma unroll
  for (int j = 0; j < kRegGroups; ++j) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(j) * kThreads;
    h[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (g < groups) {
      h[j] = reinterpret_cast<const float4*>(res)[g];
      if (xr != nullptr) {
        const float4 xv = load4(xr + 4 * g);
        h[j].x += xv.x, h[j].y += xv.y, h[j].z += xv.z, h[j].w += xv.w;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kRegGroups; ++j) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(j) * kThreads;
    if (g < groups) {
      if (write_back) reinterpret_cast<float4*>(res)[g] = h[j];
      ss += sum_sq4(h[j]);
    }
  }
  for (int64_t g = threadIdx.x + kRegGroups * kThreads; g < groups; g += kThreads) {
    float4 v = reinterpret_cast<const float4*>(res)[g];
    if (xr != nullptr) {
      const float4 xv = load4(xr + 4 * g);
      v.x += xv.x, v.y += xv.y, v.z += xv.z, v.w += xv.w;
    }
    if (write_back) reinterpret_cast<float4*>(res)[g] = v;
    ss += sum_sq4(v);
  }
  ss = block_sum(ss, scratch);
  const float inv =
      static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dim) + static_cast<double>(eps)));
  T* o = out + r * dim;
  auto emit = [&](int64_t g, float4 v) {
    const float4 w = reinterpret_cast<const float4*>(weight)[g];
    store4(o + 4 * g,
           make_float4((v.x * inv) * w.x, (v.y * inv) * w.y, (v.z * inv) * w.z, (v.w * inv) * w.w));
  };
#pragma unroll
  for (int j = 0; j < kRegGroups; ++j) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(j) * kThreads;
    if (g < groups) emit(g, h[j]);
  }
  for (int64_t g = threadIdx.x + kRegGroups * kThreads; g < groups; g += kThreads) {
    // Each thread re-reads only the groups it wrote itself, so no extra barrier is needed.
    float4 v = reinterpret_cast<const float4*>(res)[g];
    if (xr != nullptr && !write_back) {
      const float4 xv = load4(xr + 4 * g);
      v.x += xv.x, v.y += xv.y, v.z += xv.z, v.w += xv.w;
    }
    emit(g, v);
  }
}

// Any dim: one element per thread and step.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm_kernel(float* __restrict__ residual, const T* __restrict__ x,
                        const float* __restrict__ weight, T* __restrict__ out,
                        const int32_t* __restrict__ row_index, int64_t dim, float eps) {
  __shared__ double scratch[32];
  pdl_begin();
  const int64_t r = blockIdx.x;
  const auto [res, xr, write_back] = norm_row(residual, x, row_index, r, dim);

  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    float h = res[i];
    if (xr != nullptr) h += to_float(xr[i]);
    if (write_back) res[i] = h;
    ss += static_cast<double>(h) * static_cast<double>(h);
  }
  ss = block_sum(ss, scratch);  // synchronizes: residual writes are visible to the block below
  const float inv =
      static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dim) + static_cast<double>(eps)));
  T* o = out + r * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    // Each thread re-reads only the elements it wrote itself, so no extra barrier is needed.
    float h = res[i];
    if (xr != nullptr && !write_back) h += to_float(xr[i]);
    o[i] = from_float<T>((h * inv) * weight[i]);
  }
}

bool aligned(const void* p, uintptr_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

}  // namespace

Status add_rms_norm(const AddRmsNormArgs& a, cudaStream_t stream) {
  if (!is_act_dtype(a.dtype)) return invalid_argument("add_rms_norm: dtype must be bf16 or f16");
  if (a.rows <= 0) return Status();
  const bool vec = a.dim % 4 == 0 && aligned(a.residual, 16) && aligned(a.weight, 16) &&
                   aligned(a.out, 8) && (a.x == nullptr || aligned(a.x, 8));
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, {
    err = launch_kernel(vec ? add_rms_norm_vec_kernel<T> : add_rms_norm_kernel<T>,
                        dim3(static_cast<unsigned>(a.rows)), dim3(kThreads), 0, stream, a.residual,
                        static_cast<const T*>(a.x), a.weight, static_cast<T*>(a.out), a.row_index,
                        a.dim, a.eps);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of add_rms_norm_kernel");
  return check_launch("add_rms_norm_kernel");
}

}  // namespace lathe::cuda
