#include "engine/backend/cuda/decode_gemv.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/gemv_epilogue.cuh"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 2;            // output rows per warp task
constexpr int kVecs = 4;            // 16-byte vectors per lane, per row and chunk
constexpr int kChunk = kVecs * 32;  // vectors of a row per chunk (1024 elements)
constexpr int kStaticSmem = 512;    // reduction scratch (kWarps * M doubles) and M floats

struct Params {
  const void* w;
  const void* x;
  const float* residual;
  const float* norm_weight;
  const int32_t* row_index;
  float* residual_out;
  int32_t k;
  float eps;
  PairOut out;  // y, n and the SwiGLU / RoPE-KV epilogues (gemv_epilogue.cuh)
};

// 16 bytes of weights that are read exactly once: not kept in L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

template <typename T>
__device__ __forceinline__ void to_float8(const uint4& raw, float (&out)[8]) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(e[i]);
}

// x of the block into shared memory: xs[m * k + i], m < M.
template <typename T, int M, GemvInput IN>
__device__ __forceinline__ void build_x(const Params& p, T* xs, double (*red)[M], float* inv_rms) {
  const int k = p.k;
  if constexpr (IN == GemvInput::kPlain) {
    // M * k / 8 vectors, four loads in flight per thread.
    const T* x = static_cast<const T*>(p.x);
    const int kv = k / 8;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      for (int v0 = threadIdx.x; v0 < kv; v0 += 4 * kThreads) {
        uint4 r[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int v = v0 + q * kThreads;
          if (v < kv)
            r[q] = __ldg(reinterpret_cast<const uint4*>(x + static_cast<int64_t>(m) * k) + v);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int v = v0 + q * kThreads;
          if (v < kv) reinterpret_cast<uint4*>(xs + m * k)[v] = r[q];
        }
      }
    }
  } else {
    // RMSNorm of M residual rows: sum of squares in double (block reduction in a fixed order),
    // then x = (h * inv_rms) * weight rounded to T, as add_rms_norm computes it.
    constexpr int G = M >= 4 ? 1 : 4 / M;  // float4 groups per row in flight per thread
    const int groups = k / 4;
    const float4* rows[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int64_t s = p.row_index != nullptr ? p.row_index[m] : m;
      rows[m] = reinterpret_cast<const float4*>(p.residual + s * k);
    }
    double ss[M];
#pragma unroll
    for (int m = 0; m < M; ++m) ss[m] = 0.0;
    for (int g0 = threadIdx.x; g0 < groups; g0 += G * kThreads) {
      float4 h[M][G];
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int q = 0; q < G; ++q) {
          const int g = g0 + q * kThreads;
          h[m][q] = g < groups ? rows[m][g] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int q = 0; q < G; ++q) ss[m] += sum_sq4(h[m][q]);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const double t = warp_sum(ss[m]);
      if (lane == 0) red[warp][m] = t;
    }
    __syncthreads();
    if (threadIdx.x < M) {
      double t = 0.0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) t += red[w][threadIdx.x];
      inv_rms[threadIdx.x] =
          static_cast<float>(1.0 / sqrt(t / static_cast<double>(k) + static_cast<double>(p.eps)));
    }
    __syncthreads();
    const float4* nw = reinterpret_cast<const float4*>(p.norm_weight);
    for (int g0 = threadIdx.x; g0 < groups; g0 += G * kThreads) {
      float4 h[M][G], wv[G];
#pragma unroll
      for (int q = 0; q < G; ++q) {
        const int g = g0 + q * kThreads;
        wv[q] = g < groups ? __ldg(nw + g) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int m = 0; m < M; ++m)
          h[m][q] = g < groups ? rows[m][g] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float inv = inv_rms[m];
#pragma unroll
        for (int q = 0; q < G; ++q) {
          const int g = g0 + q * kThreads;
          if (g < groups)
            store4(xs + m * k + 4 * g,
                   make_float4((h[m][q].x * inv) * wv[q].x, (h[m][q].y * inv) * wv[q].y,
                               (h[m][q].z * inv) * wv[q].z, (h[m][q].w * inv) * wv[q].w));
        }
      }
    }
  }
}

template <typename T, typename OutT, int M, GemvInput IN, GemvOutput OUT>
__global__ void __launch_bounds__(kThreads, 2) decode_gemv_kernel(const Params p) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  T* xs = reinterpret_cast<T*>(smem_raw);
  __shared__ double red[kWarps][M];
  __shared__ float inv_rms[M];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = p.k;
  const int kv = p.k / 8;
  const int chunks = (kv + kChunk - 1) / kChunk;
  const int tasks = OUT == GemvOutput::kSwiglu ? p.out.pair_stride : (p.out.n + kRows - 1) / kRows;
  const int nw = gridDim.x * kWarps;
  const T* w = static_cast<const T*>(p.w);

  // Loads run ahead of the arithmetic by two (task, chunk) steps.
  int ld_task = blockIdx.x * kWarps + warp, ld_chunk = 0;
  auto issue = [&](uint4(&b)[kRows][kVecs]) {
    if (ld_task >= tasks) return;
    int rows[kRows];
    task_rows<OUT>(p.out, ld_task, rows[0], rows[1]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = rows[r];
      const bool row_ok = row < p.out.n;
      const T* wr = w + (row_ok ? static_cast<int64_t>(row) : 0) * k;
#pragma unroll
      for (int u = 0; u < kVecs; ++u) {
        const int v = ld_chunk * kChunk + u * 32 + lane;
        b[r][u] = row_ok && v < kv ? load_stream(wr + static_cast<int64_t>(v) * 8)
                                   : make_uint4(0u, 0u, 0u, 0u);
      }
    }
    if (++ld_chunk == chunks) ld_chunk = 0, ld_task += nw;
  };
  uint4 b0[kRows][kVecs], b1[kRows][kVecs];
  issue(b0);
  issue(b1);

  pdl_wait();
  pdl_trigger();
  build_x<T, M, IN>(p, xs, red, inv_rms);
  __syncthreads();

  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;
  int task = blockIdx.x * kWarps + warp, chunk = 0;
  auto consume = [&](const uint4(&b)[kRows][kVecs]) {
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int v = chunk * kChunk + u * 32 + lane;
      if (v < kv) {
        float wf[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) to_float8<T>(b[r][u], wf[r]);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          load8(xs + m * k + static_cast<int64_t>(v) * 8, xf);
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(xf[e], wf[r][e], acc[m][r]);
        }
      }
    }
    if (++chunk < chunks) return;
    // The task's rows are complete: reduce over the warp (every lane gets the sums), lane 0 stores
    // (lane m handles token m in the RoPE epilogue).
    int rows[kRows];
    task_rows<OUT>(p.out, task, rows[0], rows[1]);
    if constexpr (OUT == GemvOutput::kRopeKv) {
      float s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float a0 = warp_sum(acc[m][0]), a1 = warp_sum(acc[m][1]);
        acc[m][0] = acc[m][1] = 0.f;
        if (lane == m) s0 = a0, s1 = a1;
      }
      if (lane < M) rope_kv_epilogue<T>(p.out, lane, rows[0], rows[1], s0, s1);
    } else {
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float s[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          s[r] = warp_sum(acc[m][r]);
          acc[m][r] = 0.f;
        }
        if (lane != 0) continue;
        if constexpr (OUT == GemvOutput::kSwiglu) {
          swiglu_epilogue<T>(p.out, m, task, s[0], s[1]);
        } else {
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const int row = rows[r];
            if (row >= p.out.n) continue;
            const int64_t o = static_cast<int64_t>(m) * p.out.n + row;
            if constexpr (OUT == GemvOutput::kResidualAdd) {
              p.residual_out[o] += to_float(from_float<T>(s[r]));
            } else {
              static_cast<OutT*>(p.out.y)[o] = from_float<OutT>(s[r]);
            }
          }
        }
      }
    }
    chunk = 0;
    task += nw;
  };

  while (task < tasks) {
    consume(b0);
    issue(b0);
    if (task >= tasks) break;
    consume(b1);
    issue(b1);
  }
}

template <typename T, typename OutT, int M, GemvInput IN, GemvOutput OUT>
cudaError_t launch_one(const Params& p, int blocks, size_t smem, cudaStream_t stream) {
  auto kernel = decode_gemv_kernel<T, OutT, M, IN, OUT>;
  static std::atomic<size_t> configured{48 << 10};
  const cudaError_t err = allow_dynamic_smem(kernel, smem, configured);
  if (err != cudaSuccess) return err;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream,
                       p);
}

// The combinations the runner uses (and plain products for tools and tests): plain -> store,
// plain -> residual add (o_proj, down_proj), norm -> store (qkv_proj; lm_head in f32),
// norm -> SwiGLU (gate_up_proj), norm -> RoPE/KV (qkv_proj). decode_gemv() refuses the others.
template <typename T, int M>
cudaError_t launch_m(const DecodeGemvArgs& a, const Params& p, int blocks, size_t smem,
                     cudaStream_t stream) {
  constexpr GemvInput kPlain = GemvInput::kPlain, kNorm = GemvInput::kRmsNorm;
  const bool norm = a.input == kNorm;
  if (a.output == GemvOutput::kResidualAdd)
    return launch_one<T, T, M, kPlain, GemvOutput::kResidualAdd>(p, blocks, smem, stream);
  if (a.output == GemvOutput::kSwiglu)
    return launch_one<T, T, M, kNorm, GemvOutput::kSwiglu>(p, blocks, smem, stream);
  if (a.output == GemvOutput::kRopeKv)
    return launch_one<T, T, M, kNorm, GemvOutput::kRopeKv>(p, blocks, smem, stream);
  if (a.out_dtype == DType::kF32)
    return norm ? launch_one<T, float, M, kNorm, GemvOutput::kStore>(p, blocks, smem, stream)
                : launch_one<T, float, M, kPlain, GemvOutput::kStore>(p, blocks, smem, stream);
  return norm ? launch_one<T, T, M, kNorm, GemvOutput::kStore>(p, blocks, smem, stream)
              : launch_one<T, T, M, kPlain, GemvOutput::kStore>(p, blocks, smem, stream);
}

template <typename T>
cudaError_t launch_t(const DecodeGemvArgs& a, const Params& p, int blocks, size_t smem,
                     cudaStream_t stream) {
  switch (a.m) {
    case 1:
      return launch_m<T, 1>(a, p, blocks, smem, stream);
    case 2:
      return launch_m<T, 2>(a, p, blocks, smem, stream);
    case 3:
      return launch_m<T, 3>(a, p, blocks, smem, stream);
    default:
      return launch_m<T, 4>(a, p, blocks, smem, stream);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

struct DeviceFacts {
  int sm_count = 0;
  int smem_per_sm = 0;
};

Result<DeviceFacts> device_facts() {
  int dev = 0;
  LATHE_CUDA_TRY(cudaGetDevice(&dev));
  DeviceFacts f;
  LATHE_CUDA_TRY(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, dev));
  LATHE_CUDA_TRY(
      cudaDeviceGetAttribute(&f.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  return f;
}

}  // namespace

bool decode_gemv_fits(int64_t m, int64_t k, int max_smem_optin) {
  return m >= 1 && m <= kDecodeGemvMaxM && k > 0 && k % 8 == 0 && k < (int64_t{1} << 30) &&
         m * k * 2 + kStaticSmem <= max_smem_optin;
}

Status decode_gemv(const DecodeGemvArgs& a, cudaStream_t stream) {
  if (!is_act_dtype(a.dtype)) return invalid_argument("decode_gemv: dtype must be bf16 or f16");
  if (a.m < 1 || a.m > kDecodeGemvMaxM)
    return invalid_argument("decode_gemv: M must be in [1, " + std::to_string(kDecodeGemvMaxM) +
                            "]");
  if (a.k <= 0 || a.k % 8 != 0 || a.n <= 0 || a.n >= (int64_t{1} << 31) || a.k >= (1 << 30))
    return invalid_argument("decode_gemv: need k % 8 == 0 and n, k in range");
  if (!aligned16(a.w) || (a.input == GemvInput::kPlain && !aligned16(a.x)))
    return invalid_argument("decode_gemv: w and x must be 16-byte aligned");
  if (a.input == GemvInput::kRmsNorm && (a.residual == nullptr || a.norm_weight == nullptr ||
                                         !aligned16(a.residual) || !aligned16(a.norm_weight)))
    return invalid_argument(
        "decode_gemv: the RMSNorm input needs 16-byte aligned residual rows "
        "and norm weight");
  if (a.output == GemvOutput::kSwiglu && a.n % 2 != 0)
    return invalid_argument("decode_gemv: the SwiGLU output needs an even n (gate, then up rows)");
  if ((a.output == GemvOutput::kResidualAdd && a.input != GemvInput::kPlain) ||
      ((a.output == GemvOutput::kSwiglu || a.output == GemvOutput::kRopeKv) &&
       a.input != GemvInput::kRmsNorm))
    return unsupported(
        "decode_gemv: instantiated for plain -> store/residual add and norm -> "
        "store/SwiGLU/RoPE");
  if (a.output == GemvOutput::kRopeKv)
    LATHE_RETURN_IF_ERROR(check_rope_kv("decode_gemv", a.n, a.rope, a.dtype));
  if (a.output == GemvOutput::kResidualAdd ? a.residual_out == nullptr : a.y == nullptr)
    return invalid_argument("decode_gemv: no output buffer");
  if (a.output == GemvOutput::kStore && a.out_dtype != a.dtype && a.out_dtype != DType::kF32)
    return invalid_argument("decode_gemv: output must be the input dtype or f32");
  if (a.blocks_per_sm < 1 || a.blocks_per_sm > 2)
    return invalid_argument("decode_gemv: blocks_per_sm must be 1 or 2");

  thread_local int cached_device = -1;
  thread_local DeviceFacts facts;
  int dev = 0;
  LATHE_CUDA_TRY(cudaGetDevice(&dev));
  if (dev != cached_device) {
    LATHE_ASSIGN_OR_RETURN(facts, device_facts());
    cached_device = dev;
  }
  const size_t smem = static_cast<size_t>(a.m * a.k * 2);
  int per_sm = a.blocks_per_sm;
  if (per_sm == 2 && 2 * (smem + kStaticSmem + 1024) > static_cast<size_t>(facts.smem_per_sm))
    per_sm = 1;
  const int64_t tasks = pair_tasks(a.output, a.n);
  const int blocks = static_cast<int>(
      std::min<int64_t>(ceil_div(tasks, kWarps), static_cast<int64_t>(facts.sm_count) * per_sm));

  Params p{};
  p.w = a.w;
  p.x = a.x;
  p.residual = a.residual;
  p.norm_weight = a.norm_weight;
  p.row_index = a.row_index;
  p.residual_out = a.residual_out;
  p.k = static_cast<int32_t>(a.k);
  p.eps = a.eps;
  p.out = pair_out(a.output, a.y, a.n, a.rope);
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, { err = launch_t<T>(a, p, blocks, smem, stream); });
  if (err != cudaSuccess) return cuda_error(err, "launch of decode_gemv_kernel");
  return check_launch("decode_gemv_kernel");
}

}  // namespace lathe::cuda
