#include <cstdlib>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/backend/cuda/gemv_epilogue.cuh"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kRows = 2;  // output rows per block

// 16 bytes of weights that are read exactly once: do not keep them in L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

template <typename T>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(to_float(x[i]), to_float(y[i]), acc);
  return acc;
}

// Vectors per thread per loop iteration: more loads in flight for small M (fewer x registers).
template <int M>
__host__ __device__ constexpr int unroll_for() {
  return M <= 2 ? 4 : (M <= 4 ? 2 : 1);
}

// One block per task of gemv_epilogue.cuh (two output rows; kStore: rows 2t, 2t + 1).
template <typename T, typename OutT, int M, GemvOutput OUT>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const PairOut out, int64_t k,
                bool early) {
  constexpr int U = unroll_for<M>();
  const int64_t n = out.n;
  int rows[kRows];
  task_rows<OUT>(out, static_cast<int>(blockIdx.x), rows[0], rows[1]);
  const int64_t kv = k / 8;
  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;

  const T* wrow[kRows];
  bool valid[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    valid[r] = rows[r] < n;
    wrow[r] = w + static_cast<int64_t>(valid[r] ? rows[r] : rows[0]) * k;
  }
  // The weights of one iteration (U vectors of kRows rows per thread), loaded one iteration ahead.
  uint4 wv[U][kRows];
  auto load_w = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t v = base + static_cast<int64_t>(u) * kThreads;
      if (v < kv) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) wv[u][r] = load_stream(wrow[r] + v * 8);
      }
    }
  };
  // Weights do not depend on the previous kernel: the first iteration's are requested before
  // griddepcontrol.wait, so under programmatic dependent launch they overlap its tail (a norm or
  // SwiGLU kernel of a few blocks leaves most SMs to this one). x is read after the wait.
  if (early) load_w(threadIdx.x);
  pdl_wait();
  pdl_trigger();
  if (!early) load_w(threadIdx.x);

  for (int64_t base = threadIdx.x; base < kv; base += kThreads * U) {
    uint4 xv[U][M];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t v = base + static_cast<int64_t>(u) * kThreads;
      if (v < kv) {
#pragma unroll
        for (int m = 0; m < M; ++m)
          xv[u][m] = __ldg(reinterpret_cast<const uint4*>(x + m * k + v * 8));
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t v = base + static_cast<int64_t>(u) * kThreads;
      if (v < kv) {
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[m][r] = dot8<T>(xv[u][m], wv[u][r], acc[m][r]);
      }
    }
    load_w(base + static_cast<int64_t>(kThreads) * U);
  }

  __shared__ float partial[kThreads / 32][M * kRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float s = warp_sum(acc[m][r]);
      if (lane == 0) partial[warp][m * kRows + r] = s;
    }
  __syncthreads();
  if constexpr (OUT == GemvOutput::kStore) {
    if (threadIdx.x < M * kRows) {
      const int m = threadIdx.x / kRows, r = threadIdx.x % kRows;
      float s = 0.f;
#pragma unroll
      for (int wi = 0; wi < kThreads / 32; ++wi) s += partial[wi][threadIdx.x];
      if (rows[r] < n) static_cast<OutT*>(out.y)[m * n + rows[r]] = from_float<OutT>(s);
    }
  } else if (threadIdx.x < M) {  // thread m: both rows of token m (the same sums as kStore's)
    const int m = threadIdx.x;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int wi = 0; wi < kThreads / 32; ++wi)
      s0 += partial[wi][m * kRows], s1 += partial[wi][m * kRows + 1];
    if constexpr (OUT == GemvOutput::kSwiglu) {
      swiglu_epilogue<T>(out, m, static_cast<int>(blockIdx.x), s0, s1);
    } else {
      rope_kv_epilogue<T>(out, m, rows[0], rows[1], s0, s1);
    }
  }
}

// LATHE_CUDA_GEMV_EARLY=0 requests the first weights after griddepcontrol.wait (A/B runs).
bool early_weight_loads() {
  static const bool early = [] {
    const char* env = std::getenv("LATHE_CUDA_GEMV_EARLY");
    return env == nullptr || std::string(env) != "0";
  }();
  return early;
}

template <typename T, typename OutT, int M, GemvOutput OUT = GemvOutput::kStore>
cudaError_t launch(const void* x, const void* w, const PairOut& out, int64_t k,
                   cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>(pair_tasks(OUT, out.n)));
  return launch_kernel(gemv_kernel<T, OutT, M, OUT>, blocks, dim3(kThreads), 0, stream,
                       static_cast<const T*>(x), static_cast<const T*>(w), out, k,
                       early_weight_loads());
}

// The kernel for the runtime m: M = m below kMaxM, kMaxM from there (callers check m's range).
// Stores instantiate M up to kGemvMaxM, the SwiGLU and RoPE/KV epilogues up to kGemvEpilogueMaxM.
template <typename T, typename OutT, GemvOutput OUT, int kMaxM, int M = 1>
cudaError_t launch_m(int64_t m, const void* x, const void* w, const PairOut& out, int64_t k,
                     cudaStream_t stream) {
  if constexpr (M < kMaxM)
    if (m != M) return launch_m<T, OutT, OUT, kMaxM, M + 1>(m, x, w, out, k, stream);
  return launch<T, OutT, M, OUT>(x, w, out, k, stream);
}

}  // namespace

Status gemv(DType dtype, DType out_dtype, const void* x, const void* w, void* y, int64_t m,
            int64_t n, int64_t k, cudaStream_t stream, GemvOutput output, const GemvRopeKv& rope) {
  if (!is_act_dtype(dtype)) return invalid_argument("gemv: dtype must be bf16 or f16");
  if (out_dtype != dtype && out_dtype != DType::kF32)
    return invalid_argument("gemv: output must be the input dtype or f32");
  if (m < 1 || m > kGemvMaxM) return invalid_argument("gemv: M must be in [1, 8]");
  if (k % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0)
    return invalid_argument("gemv: K must be a multiple of 8 and x, w 16-byte aligned");
  if (n >= (int64_t{1} << 31)) return invalid_argument("gemv: n must be below 2^31");
  if (output != GemvOutput::kStore) {
    if (output == GemvOutput::kResidualAdd)
      return unsupported("gemv: no residual-add epilogue (decode_gemv has one)");
    if (m > kGemvEpilogueMaxM || out_dtype != dtype)
      return invalid_argument("gemv: the SwiGLU and RoPE/KV epilogues take M <= " +
                              std::to_string(kGemvEpilogueMaxM) + " and a 16-bit output");
    if (output == GemvOutput::kSwiglu && n % 2 != 0)
      return invalid_argument("gemv: the SwiGLU epilogue needs an even n (gate, then up rows)");
    if (output == GemvOutput::kRopeKv) LATHE_RETURN_IF_ERROR(check_rope_kv("gemv", n, rope));
  }
  if (n <= 0) return Status();
  const PairOut out = pair_out(output, y, n, rope);
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(dtype, T, {
    constexpr GemvOutput kStore = GemvOutput::kStore;
    if (output == GemvOutput::kSwiglu) {
      err = launch_m<T, T, GemvOutput::kSwiglu, kGemvEpilogueMaxM>(m, x, w, out, k, stream);
    } else if (output == GemvOutput::kRopeKv) {
      err = launch_m<T, T, GemvOutput::kRopeKv, kGemvEpilogueMaxM>(m, x, w, out, k, stream);
    } else {
      err = out_dtype == DType::kF32
                ? launch_m<T, float, kStore, kGemvMaxM>(m, x, w, out, k, stream)
                : launch_m<T, T, kStore, kGemvMaxM>(m, x, w, out, k, stream);
    }
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of gemv_kernel");
  return check_launch("gemv_kernel");
}

}  // namespace lathe::cuda
