// The kernel of decode_gemv.h, templated on the weights' storage (GemvWeights): decode_gemv.cu
// instantiates it for rows of the activation dtype, decode_gemv_fp8.cu and decode_gemv_int8.cu for
// 8-bit parts (split so that two cores compile them in parallel). Internal to the CUDA backend.
#pragma once

#include <atomic>

#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/gemv_epilogue.cuh"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/w8_rows.cuh"

namespace lathe::cuda::decode_gemv_detail {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 2;  // output rows per warp task
constexpr int kVecs = 4;  // 16-byte vectors per lane, per row and chunk
constexpr int kChunk =
    kVecs * 32;                   // vectors of a row per chunk (1024 16-bit or 2048 8-bit weights)
constexpr int kStaticSmem = 512;  // reduction scratch (kWarps * M doubles) and 2 M floats

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
  W8Rows w8;    // 8-bit weights (w8_rows.cuh)
};

// Weights per 16-byte vector.
template <GemvWeights WK>
__host__ __device__ constexpr int vector_elems() {
  return WK == GemvWeights::kAct ? 8 : 16;
}

template <typename T>
__device__ __forceinline__ void to_float8(const uint4& raw, float (&out)[8]) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(e[i]);
}

// One (task, chunk) step of a warp's loads: the weights' vectors of its rows.
struct Step {
  uint4 v[kRows][kVecs];
};

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

template <typename T, typename OutT, int M, GemvInput IN, GemvOutput OUT, GemvWeights WK>
__global__ void __launch_bounds__(kThreads, 2) decode_gemv_kernel(const Params p) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  T* xs = reinterpret_cast<T*>(smem_raw);
  __shared__ double red[kWarps][M];
  __shared__ float inv_rms[M];
  constexpr bool kW8 = WK != GemvWeights::kAct;
  constexpr int kE = vector_elems<WK>();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = p.k;
  const int kv = p.k / kE;
  const int chunks = (kv + kChunk - 1) / kChunk;
  const int tasks = OUT == GemvOutput::kSwiglu ? p.out.pair_stride : (p.out.n + kRows - 1) / kRows;
  const int nw = gridDim.x * kWarps;

  // Loads run ahead of the arithmetic by two (task, chunk) steps.
  int ld_task = blockIdx.x * kWarps + warp, ld_chunk = 0;
  auto issue = [&](Step& b) {
    if (ld_task >= tasks) return;
    int rows[kRows];
    task_rows<OUT>(p.out, ld_task, rows[0], rows[1]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = rows[r];
      const bool row_ok = row < p.out.n;
      if constexpr (kW8) {
        // The codes, and the vectors' scales and zero points towards L2 (consume() loads them).
        const PartRow pr = part_row(p.w8, row_ok ? row : 0);
#pragma unroll
        for (int u = 0; u < kVecs; ++u) {
          const int v = ld_chunk * kChunk + u * 32 + lane;
          const bool ok = row_ok && v < kv;
          b.v[r][u] = ok ? load_stream(pr.codes + static_cast<int64_t>(v) * 16)
                         : make_uint4(0u, 0u, 0u, 0u);
        }
        // Group scales: the lines of this chunk's scales (and zero points) towards L2, one line per
        // lane; consume() loads them. A row's single scale is loaded once per task instead.
        if (p.w8.scales.group_shift < 31 && row_ok) {
          const int si = scale_index(p.w8, pr, ld_chunk * kChunk);
          const int count = max(1, (kChunk * 16) >> p.w8.scales.group_shift);
          const int size = p.w8.scales.f16 ? 2 : 4;
          if (lane * 128 < count * size)
            prefetch_l2(static_cast<const uint8_t*>(pr.scales) + size * si + lane * 128);
          if (WK == GemvWeights::kInt8 && pr.zeros != nullptr && lane * 128 < count)
            prefetch_l2(pr.zeros + si + lane * 128);
        }
      } else {
        const T* wr = static_cast<const T*>(p.w) + (row_ok ? static_cast<int64_t>(row) : 0) * k;
#pragma unroll
        for (int u = 0; u < kVecs; ++u) {
          const int v = ld_chunk * kChunk + u * 32 + lane;
          b.v[r][u] = row_ok && v < kv ? load_stream(wr + static_cast<int64_t>(v) * 8)
                                       : make_uint4(0u, 0u, 0u, 0u);
        }
      }
    }
    if (++ld_chunk == chunks) ld_chunk = 0, ld_task += nw;
  };
  Step b0, b1;
  issue(b0);
  issue(b1);

  pdl_wait();
  pdl_trigger();
  build_x<T, M, IN>(p, xs, red, inv_rms);
  __syncthreads();

  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;
  }
  int task = blockIdx.x * kWarps + warp, chunk = 0;
  // 8-bit weights: where the current task's rows find their scales, and with one scale per row
  // (per tensor or channel) that scale and zero point.
  const bool row_scales = p.w8.scales.group_shift == 31;
  PartRow cur[kRows];
  float row_sc[kRows], row_mz[kRows];
  auto rows_of_task = [&] {
    if constexpr (kW8) {
      if (task >= tasks) return;
      int rows[kRows];
      task_rows<OUT>(p.out, task, rows[0], rows[1]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        cur[r] = part_row(p.w8, rows[r] < p.out.n ? rows[r] : 0);
        if (row_scales) scale_at<WK>(p.w8, cur[r], cur[r].scale_row, row_sc[r], row_mz[r]);
      }
    }
  };
  rows_of_task();
  auto consume = [&](const Step& b) {
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int v = chunk * kChunk + u * 32 + lane;
      if (v < kv) {
        if constexpr (kW8) {
          // Each row's dot with the vector's 16 inputs (two halves of 8), then scale * dot into
          // its sum.
          float sc[kRows], mz[kRows];
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            if (row_scales)
              sc[r] = row_sc[r], mz[r] = row_mz[r];
            else
              scale_at<WK>(p.w8, cur[r], scale_index(p.w8, cur[r], v), sc[r], mz[r]);
          }
          float d[M][kRows];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float wf[kRows][8];
#pragma unroll
            for (int r = 0; r < kRows; ++r) decode8<WK>(b.v[r][u], h, mz[r], wf[r]);
#pragma unroll
            for (int m = 0; m < M; ++m) {
              float xf[8];
              load8(xs + m * k + static_cast<int64_t>(v) * 16 + 8 * h, xf);
#pragma unroll
              for (int r = 0; r < kRows; ++r)
#pragma unroll
                for (int e = 0; e < 8; ++e)
                  d[m][r] = fmaf(xf[e], wf[r][e], h == 0 && e == 0 ? 0.f : d[m][r]);
            }
          }
#pragma unroll
          for (int m = 0; m < M; ++m)
#pragma unroll
            for (int r = 0; r < kRows; ++r) acc[m][r] = fmaf(sc[r], d[m][r], acc[m][r]);
        } else {
          float wf[kRows][8];
#pragma unroll
          for (int r = 0; r < kRows; ++r) to_float8<T>(b.v[r][u], wf[r]);
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
    rows_of_task();
  };

  while (task < tasks) {
    consume(b0);
    issue(b0);
    if (task >= tasks) break;
    consume(b1);
    issue(b1);
  }
}

template <typename T, typename OutT, int M, GemvInput IN, GemvOutput OUT, GemvWeights WK>
cudaError_t launch_one(const Params& p, int blocks, size_t smem, cudaStream_t stream) {
  auto kernel = decode_gemv_kernel<T, OutT, M, IN, OUT, WK>;
  static std::atomic<size_t> configured{48 << 10};
  const cudaError_t err = allow_dynamic_smem(kernel, smem, configured);
  if (err != cudaSuccess) return err;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream,
                       p);
}

// The combinations the runner uses (and plain products for tools and tests): plain -> store,
// plain -> residual add (o_proj, down_proj), norm -> store (qkv_proj; lm_head in f32),
// norm -> SwiGLU (gate_up_proj), norm -> RoPE/KV (qkv_proj). decode_gemv() refuses the others.
template <typename T, int M, GemvWeights WK>
cudaError_t launch_m(const DecodeGemvArgs& a, const Params& p, int blocks, size_t smem,
                     cudaStream_t stream) {
  constexpr GemvInput kPlain = GemvInput::kPlain, kNorm = GemvInput::kRmsNorm;
  constexpr GemvOutput kStore = GemvOutput::kStore;
  const bool norm = a.input == kNorm;
  if (a.output == GemvOutput::kResidualAdd)
    return launch_one<T, T, M, kPlain, GemvOutput::kResidualAdd, WK>(p, blocks, smem, stream);
  if (a.output == GemvOutput::kSwiglu)
    return launch_one<T, T, M, kNorm, GemvOutput::kSwiglu, WK>(p, blocks, smem, stream);
  if (a.output == GemvOutput::kRopeKv)
    return launch_one<T, T, M, kNorm, GemvOutput::kRopeKv, WK>(p, blocks, smem, stream);
  if (a.out_dtype == DType::kF32)
    return norm ? launch_one<T, float, M, kNorm, kStore, WK>(p, blocks, smem, stream)
                : launch_one<T, float, M, kPlain, kStore, WK>(p, blocks, smem, stream);
  return norm ? launch_one<T, T, M, kNorm, kStore, WK>(p, blocks, smem, stream)
              : launch_one<T, T, M, kPlain, kStore, WK>(p, blocks, smem, stream);
}

// The launch for the weights WK at a.m rows of a.dtype activations (decode_gemv() has checked
// the arguments); defined where instantiated.
template <GemvWeights WK>
cudaError_t launch_weights(const DecodeGemvArgs& a, const Params& p, int blocks, size_t smem,
                           cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, {
    switch (a.m) {
      case 1:
        err = launch_m<T, 1, WK>(a, p, blocks, smem, stream);
        break;
      case 2:
        err = launch_m<T, 2, WK>(a, p, blocks, smem, stream);
        break;
      case 3:
        err = launch_m<T, 3, WK>(a, p, blocks, smem, stream);
        break;
      default:
        err = launch_m<T, 4, WK>(a, p, blocks, smem, stream);
    }
  });
  return err;
}

extern template cudaError_t launch_weights<GemvWeights::kFp8>(const DecodeGemvArgs&, const Params&,
                                                              int, size_t, cudaStream_t);
extern template cudaError_t launch_weights<GemvWeights::kInt8>(const DecodeGemvArgs&, const Params&,
                                                               int, size_t, cudaStream_t);

}  // namespace lathe::cuda::decode_gemv_detail
