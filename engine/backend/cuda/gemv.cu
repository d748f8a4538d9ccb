#include <cstdlib>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/backend/cuda/gemv_epilogue.cuh"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

template <typename T>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(to_float(x[i]), to_float(y[i]), acc);
  return acc;
}

// Launch shapes: tasks (two output rows each) per block, threads per block, and vectors per row
// and thread requested per loop iteration. kNarrow (one task of 128 threads) serves every
// product; at M <= 2, stores whose rows are longer than one narrow iteration (k > 4096: the
// Llama down projection, k = 14336) use kWide, two tasks of 256 threads (32 KiB in flight per
// block, half the blocks): 28.2-28.4 us instead of 30.6 for the 8B down projection alone and a
// 1.2% shorter batch-1 step on the H200 (docs/gpu-notes.md, "Projection shapes at batch 1"),
// where the same shape made the k = 4096 products slower (qkv +29 us, lm_head +23 us a step).
struct GemvShape {
  int tasks, threads, unroll;
};
enum class GemvWidth { kNarrow, kWide };
template <int M, GemvWidth W>
__host__ __device__ constexpr GemvShape gemv_shape() {
  if constexpr (W == GemvWidth::kWide) return GemvShape{2, 256, 2};
  // Vectors per thread per iteration: more loads in flight for small M (fewer x registers).
  return GemvShape{1, 128, M <= 2 ? 4 : (M <= 4 ? 2 : 1)};
}
constexpr int64_t kGemvNarrowRowElems = 8 * 128 * 4;  // one narrow iteration at M <= 2

// Block b holds tasks b * kTasks + j (gemv_epilogue.cuh; kStore: rows 2t, 2t + 1, so its rows are
// b * 2 * kTasks + r). The epilogue recomputes rows from indices instead of indexing per-thread
// arrays with a thread-dependent index, which would put them in local memory.
template <typename T, typename OutT, int M, GemvOutput OUT, GemvWidth W>
__global__ void __launch_bounds__(gemv_shape<M, W>().threads)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const PairOut out, int64_t k,
                bool early) {
  constexpr GemvShape kShape = gemv_shape<M, W>();
  constexpr int kTasks = kShape.tasks, kThreads = kShape.threads, U = kShape.unroll;
  constexpr int kRows = 2 * kTasks;
  const int64_t n = out.n;
  // Tasks past the end (the last block's second one) read task 0's rows and store nothing.
  const int tasks = OUT == GemvOutput::kSwiglu ? out.pair_stride : (out.n + 1) / 2;
  const int t0 = static_cast<int>(blockIdx.x) * kTasks;
  const T* wrow[kRows];
#pragma unroll
  for (int j = 0; j < kTasks; ++j) {
    int r0, r1;
    task_rows<OUT>(out, t0 + j < tasks ? t0 + j : 0, r0, r1);
    wrow[2 * j] = w + static_cast<int64_t>(r0) * k;
    wrow[2 * j + 1] = w + static_cast<int64_t>(r1 < n ? r1 : r0) * k;
  }
  const int64_t kv = k / 8;
  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;

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

  constexpr int kWarps = kThreads / 32;
  __shared__ float partial[kWarps][M * kRows];
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
      const int64_t row = static_cast<int64_t>(blockIdx.x) * kRows + r;
      float s = 0.f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) s += partial[wi][threadIdx.x];
      if (row < n) static_cast<OutT*>(out.y)[m * n + row] = from_float<OutT>(s);
    }
  } else if (threadIdx.x < M * kTasks) {  // token m, task t: its two rows (kStore's sums)
    const int m = threadIdx.x / kTasks, j = threadIdx.x % kTasks, t = t0 + j;
    if (t >= tasks) return;
    const int c = m * kRows + 2 * j;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) s0 += partial[wi][c], s1 += partial[wi][c + 1];
    if constexpr (OUT == GemvOutput::kSwiglu) {
      swiglu_epilogue<T>(out, m, t, s0, s1);
    } else {
      int r0, r1;
      task_rows<OUT>(out, t, r0, r1);
      rope_kv_epilogue<T>(out, m, r0, r1, s0, s1);
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

template <typename T, typename OutT, int M, GemvOutput OUT, GemvWidth W>
cudaError_t launch_shape(const void* x, const void* w, const PairOut& out, int64_t k,
                         cudaStream_t stream) {
  constexpr GemvShape kShape = gemv_shape<M, W>();
  const int64_t tasks = pair_tasks(OUT, out.n);
  const dim3 blocks(static_cast<unsigned>((tasks + kShape.tasks - 1) / kShape.tasks));
  return launch_kernel(gemv_kernel<T, OutT, M, OUT, W>, blocks, dim3(kShape.threads), 0, stream,
                       static_cast<const T*>(x), static_cast<const T*>(w), out, k,
                       early_weight_loads());
}

template <typename T, typename OutT, int M, GemvOutput OUT = GemvOutput::kStore>
cudaError_t launch(const void* x, const void* w, const PairOut& out, int64_t k,
                   cudaStream_t stream) {
  if constexpr (M <= 2 && OUT == GemvOutput::kStore)
    if (k > kGemvNarrowRowElems)
      return launch_shape<T, OutT, M, OUT, GemvWidth::kWide>(x, w, out, k, stream);
  return launch_shape<T, OutT, M, OUT, GemvWidth::kNarrow>(x, w, out, k, stream);
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
    if (output == GemvOutput::kRopeKv) LATHE_RETURN_IF_ERROR(check_rope_kv("gemv", n, rope, dtype));
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
