// The kernel of decode_gemv.h, templated on the weights' storage (GemvWeights): decode_gemv.cu
// instantiates it for rows of the activation dtype, decode_gemv_{fp8,int8}.cu for 8-bit parts with
// one scale per row and decode_gemv_{fp8,int8}_groups.cu for group or block scales (split so that
// two cores compile them in parallel). Internal to the CUDA backend.
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
// Vectors of a row per chunk (1024 16-bit or 2048 8-bit weights).
constexpr int kChunk = kVecs * 32;
// Static shared memory: reduction scratch (kWarps * M doubles, kWarps * M floats), 3 M floats.
constexpr int kStaticSmem = 512;

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

// F16 staging: the scale 2^e of row m, whose largest |x| is t = max over warps of mx[w][m] times
// `factor`, that brings t into [4, 8) (1 for a row of zeros, infinities or NaN); thread 0 stores
// 2^-e in x_inv[m].
template <int M>
__device__ __forceinline__ float f16_row_scale(const float (*mx)[M], int m, float factor,
                                               float* x_inv) {
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t = fmaxf(t, mx[w][m]);
  t *= factor;
  // t = f 2^q with f in [0.5, 1): e = 3 - q.
  const int q = static_cast<int>((__float_as_uint(t) >> 23) & 0xFF) - 126;
  const int e = t > 0.f && t <= 3.4e38f ? max(-120, min(120, 3 - q)) : 0;
  if (threadIdx.x == 0) x_inv[m] = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);
  return __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
}

// x of the block into shared memory, xs[m * k + i], m < M: as T; or with F16 (8-bit weights) as
// f16, row m scaled by a power of two 2^e[m] that brings its largest |x| into [4, 8) (exact unless
// an element falls under f16's normal range 2^-14, i.e. under 2^-17 of the row's largest), so that
// the products' f16 partial sums of 8 terms stay under 2^15 (|fp8| <= 448, |code - zero| <= 255);
// x_inv[m] = 2^-e[m] undoes it. mx: scratch. The caller synchronizes the block after.
template <typename T, int M, GemvInput IN, bool F16>
__device__ __forceinline__ void build_x(const Params& p, T* xs, double (*red)[M], float* inv_rms,
                                        float (*mx)[M], float* x_inv) {
  const int k = p.k;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float hi[M];  // F16: this thread's largest |x| (kPlain) or |h w| (kRmsNorm) per row
#pragma unroll
  for (int m = 0; m < M; ++m) hi[m] = 0.f;
  if constexpr (IN == GemvInput::kPlain) {
    // M * k / 8 vectors, four loads in flight per thread; thread t copies vectors t + j kThreads.
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
          if (v >= kv) continue;
          reinterpret_cast<uint4*>(xs + m * k)[v] = r[q];
          if constexpr (F16) {
            float f[8];
            to_float8<T>(r[q], f);
#pragma unroll
            for (int e = 0; e < 8; ++e) hi[m] = fmaxf(hi[m], fabsf(f[e]));
          }
        }
      }
    }
    if constexpr (F16) {
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float t = warp_max(hi[m]);
        if (lane == 0) mx[warp][m] = t;
      }
      __syncthreads();
      // Each thread rewrites its own vectors as scaled f16.
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float scale = f16_row_scale<M>(mx, m, 1.f, x_inv);
        for (int v = threadIdx.x; v < kv; v += kThreads) {
          float f[8];
          load8(xs + m * k + 8 * v, f);
          uint4 raw;
          __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
          for (int i = 0; i < 4; ++i)
            h[i] = __floats2half2_rn(f[2 * i] * scale, f[2 * i + 1] * scale);
          *reinterpret_cast<uint4*>(xs + m * k + 8 * v) = raw;
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
    const float4* nw = reinterpret_cast<const float4*>(p.norm_weight);
    double ss[M];
#pragma unroll
    for (int m = 0; m < M; ++m) ss[m] = 0.0;
    for (int g0 = threadIdx.x; g0 < groups; g0 += G * kThreads) {
      float4 h[M][G], wv[G];
#pragma unroll
      for (int q = 0; q < G; ++q) {
        const int g = g0 + q * kThreads;
        if constexpr (F16) wv[q] = g < groups ? __ldg(nw + g) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int m = 0; m < M; ++m)
          h[m][q] = g < groups ? rows[m][g] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int q = 0; q < G; ++q) {
          ss[m] += sum_sq4(h[m][q]);
          if constexpr (F16)
            hi[m] =
                fmaxf(fmaxf(hi[m], fmaxf(fabsf(h[m][q].x * wv[q].x), fabsf(h[m][q].y * wv[q].y))),
                      fmaxf(fabsf(h[m][q].z * wv[q].z), fabsf(h[m][q].w * wv[q].w)));
        }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const double t = warp_sum(ss[m]);
      if (lane == 0) red[warp][m] = t;
      if constexpr (F16) {
        const float u = warp_max(hi[m]);
        if (lane == 0) mx[warp][m] = u;
      }
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
    // F16: the row's largest |x| is its largest |h w| times inv_rms, give or take the rounding to
    // T (2^-8; the partial sums' bound keeps room for it).
    float scale[M];
#pragma unroll
    for (int m = 0; m < M; ++m) scale[m] = F16 ? f16_row_scale<M>(mx, m, inv_rms[m], x_inv) : 1.f;
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
          if (g >= groups) continue;
          const float4 v = make_float4((h[m][q].x * inv) * wv[q].x, (h[m][q].y * inv) * wv[q].y,
                                       (h[m][q].z * inv) * wv[q].z, (h[m][q].w * inv) * wv[q].w);
          if constexpr (F16) {
            const float sc = scale[m];
            uint2 raw;
            __half2* o = reinterpret_cast<__half2*>(&raw);
            o[0] = __floats2half2_rn(to_float(from_float<T>(v.x)) * sc,
                                     to_float(from_float<T>(v.y)) * sc);
            o[1] = __floats2half2_rn(to_float(from_float<T>(v.z)) * sc,
                                     to_float(from_float<T>(v.w)) * sc);
            *reinterpret_cast<uint2*>(xs + m * k + 4 * g) = raw;
          } else {
            store4(xs + m * k + 4 * g, v);
          }
        }
      }
    }
  }
}

// RS (8-bit weights only): every row has one scale (per tensor or channel; group_shift 31). The
// loads of rows of the activation type, and of 8-bit rows with RS, find each task's row pointers
// once, at the task's first chunk, and address the chunks from them; 8-bit rows with group scales
// look their rows' parts up at every step, which keeps the registers of the M = 3-4 instantiations
// under their budget (run 100).
template <typename T, typename OutT, int M, GemvInput IN, GemvOutput OUT, GemvWeights WK, bool RS>
__global__ void __launch_bounds__(kThreads, 2) decode_gemv_kernel(const Params p) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  T* xs = reinterpret_cast<T*>(smem_raw);
  __shared__ double red[kWarps][M];
  __shared__ float inv_rms[M];
  __shared__ float x_max[kWarps][M], x_inv[M];  // 8-bit weights: build_x's f16 scales
  constexpr bool kW8 = WK != GemvWeights::kAct;
  constexpr int kE = vector_elems<WK>();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = p.k;
  const int kv = p.k / kE;
  const int chunks = (kv + kChunk - 1) / kChunk;
  const int tasks = OUT == GemvOutput::kSwiglu ? p.out.pair_stride : (p.out.n + kRows - 1) / kRows;
  const int nw = gridDim.x * kWarps;

  static_assert(!RS || kW8, "RS is for 8-bit weights");
  constexpr bool kRowPtrs = RS || !kW8;

  // Loads run ahead of the arithmetic by two (task, chunk) steps.
  int ld_task = blockIdx.x * kWarps + warp, ld_chunk = 0;
  // kRowPtrs: the load task's rows at this lane's vector of the current chunk (a row past n reads
  // row 0; its sums are never stored).
  const uint8_t* ld_codes[kRows];
  auto issue = [&](Step& b) {
    if (ld_task >= tasks) return;
    if constexpr (kRowPtrs) {
      if (ld_chunk == 0) {
        int rows[kRows];
        task_rows<OUT>(p.out, ld_task, rows[0], rows[1]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const int row = rows[r] < p.out.n ? rows[r] : 0;
          if constexpr (kW8) {
            const PartRow pr = part_row(p.w8, row);
            ld_codes[r] = pr.codes + lane * 16;
            // The row's scale (and zero point) towards L2; consume() loads it at the task's
            // start (a per-tensor scale, one address for every warp, is left to L1).
            if (p.w8.scales.row_stride != 0 && lane == 0) {
              prefetch_l2(static_cast<const uint8_t*>(pr.scales) +
                          (p.w8.scales.f16 ? 2 : 4) * pr.scale_row);
              if (WK == GemvWeights::kInt8 && pr.zeros != nullptr)
                prefetch_l2(pr.zeros + pr.scale_row);
            }
          } else {
            ld_codes[r] =
                reinterpret_cast<const uint8_t*>(static_cast<const T*>(p.w) + row * k) + lane * 16;
          }
        }
      }
      // Vectors past k are not loaded: consume() skips them.
      const int v0 = ld_chunk * kChunk + lane;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int u = 0; u < kVecs; ++u)
          if (v0 + u * 32 < kv) b.v[r][u] = load_stream(ld_codes[r] + u * 32 * 16);
        ld_codes[r] += kChunk * 16;
      }
      if (++ld_chunk == chunks) ld_chunk = 0, ld_task += nw;
      return;
    }
    // 8-bit rows with group scales.
    int rows[kRows];
    task_rows<OUT>(p.out, ld_task, rows[0], rows[1]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = rows[r];
      const bool row_ok = row < p.out.n;
      // The codes, and the vectors' scales and zero points towards L2 (consume() loads them).
      const PartRow pr = part_row(p.w8, row_ok ? row : 0);
#pragma unroll
      for (int u = 0; u < kVecs; ++u) {
        const int v = ld_chunk * kChunk + u * 32 + lane;
        const bool ok = row_ok && v < kv;
        b.v[r][u] =
            ok ? load_stream(pr.codes + static_cast<int64_t>(v) * 16) : make_uint4(0u, 0u, 0u, 0u);
      }
      // The lines of this chunk's group scales (and zero points) towards L2, one line per lane;
      // consume() loads them.
      if (row_ok) {
        const int si = scale_index(p.w8, pr, ld_chunk * kChunk);
        const int count = max(1, (kChunk * 16) >> p.w8.scales.group_shift);
        const int size = p.w8.scales.f16 ? 2 : 4;
        if (lane * 128 < count * size)
          prefetch_l2(static_cast<const uint8_t*>(pr.scales) + size * si + lane * 128);
        if (WK == GemvWeights::kInt8 && pr.zeros != nullptr && lane * 128 < count)
          prefetch_l2(pr.zeros + si + lane * 128);
      }
    }
    if (++ld_chunk == chunks) ld_chunk = 0, ld_task += nw;
  };
  Step b0, b1;
  issue(b0);
  issue(b1);

  pdl_wait();
  pdl_trigger();
  // 8-bit weights: x staged as scaled f16 for products in f16 pairs (build_x).
  build_x<T, M, IN, kW8>(p, xs, red, inv_rms, x_max, x_inv);
  __syncthreads();

  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;
  }
  int task = blockIdx.x * kWarps + warp, chunk = 0;
  // 8-bit weights: with group scales, where the current task's rows find them; with one scale per
  // row (RS), that scale and zero point.
  PartRow cur[kRows];
  float row_sc[kRows];
  uint32_t row_mz[kRows];
  auto rows_of_task = [&] {
    if constexpr (kW8) {
      if (task >= tasks) return;
      int rows[kRows];
      task_rows<OUT>(p.out, task, rows[0], rows[1]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const PartRow pr = part_row(p.w8, rows[r] < p.out.n ? rows[r] : 0);
        if constexpr (RS)
          scale_at<WK>(p.w8, pr, pr.scale_row, row_sc[r], row_mz[r]);
        else
          cur[r] = pr;
      }
    }
  };
  rows_of_task();
  auto consume = [&](const Step& b) {
    const int v0 = chunk * kChunk + lane;
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int v = v0 + u * 32;
      if (v < kv) {
        if constexpr (kW8) {
          // Each row's 16 weights as 8 f16 pairs; per token, the dot with the vector's 16 inputs
          // (build_x) as 8 f16 pair products summed in f16 (each half 8 terms), then in f32,
          // scale * dot into the row's sum.
          float sc[kRows];
          uint32_t mz[kRows];
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            if constexpr (RS)
              sc[r] = row_sc[r], mz[r] = row_mz[r];
            else
              scale_at<WK>(p.w8, cur[r], scale_index(p.w8, cur[r], v), sc[r], mz[r]);
          }
          __half2 wh[kRows][8];
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const uint32_t words[4] = {b.v[r][u].x, b.v[r][u].y, b.v[r][u].z, b.v[r][u].w};
#pragma unroll
            for (int i = 0; i < 8; ++i) wh[r][i] = decode_pair<WK>(words[i / 2], i % 2, mz[r]);
          }
#pragma unroll
          for (int m = 0; m < M; ++m) {
            const uint4* xq = reinterpret_cast<const uint4*>(xs + m * p.k + v * 16);
            uint4 xr[2] = {xq[0], xq[1]};
            const __half2* xh = reinterpret_cast<const __half2*>(xr);
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              __half2 d = __hmul2(wh[r][0], xh[0]);
#pragma unroll
              for (int i = 1; i < 8; ++i) d = __hfma2(wh[r][i], xh[i], d);
              const float2 f = __half22float2(d);
              acc[m][r] = fmaf(sc[r], f.x + f.y, acc[m][r]);
            }
          }
        } else {
          float wf[kRows][8];
#pragma unroll
          for (int r = 0; r < kRows; ++r) to_float8<T>(b.v[r][u], wf[r]);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            float xf[8];
            load8(xs + m * p.k + v * 8, xf);
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
        float a0 = warp_sum(acc[m][0]), a1 = warp_sum(acc[m][1]);
        if constexpr (kW8) a0 *= x_inv[m], a1 *= x_inv[m];
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
          if constexpr (kW8) s[r] *= x_inv[m];
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

template <typename T, typename OutT, int M, GemvInput IN, GemvOutput OUT, GemvWeights WK, bool RS>
cudaError_t launch_one(const Params& p, int blocks, size_t smem, cudaStream_t stream) {
  auto kernel = decode_gemv_kernel<T, OutT, M, IN, OUT, WK, RS>;
  static std::atomic<size_t> configured{48 << 10};
  const cudaError_t err = allow_dynamic_smem(kernel, smem, configured);
  if (err != cudaSuccess) return err;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream,
                       p);
}

// The combinations the runner uses (and plain products for tools and tests): plain -> store,
// plain -> residual add (o_proj, down_proj), norm -> store (qkv_proj; lm_head in f32),
// norm -> SwiGLU (gate_up_proj), norm -> RoPE/KV (qkv_proj). decode_gemv() refuses the others.
template <typename T, int M, GemvWeights WK, bool RS>
cudaError_t launch_m(const DecodeGemvArgs& a, const Params& p, int blocks, size_t smem,
                     cudaStream_t stream) {
  constexpr GemvInput kPlain = GemvInput::kPlain, kNorm = GemvInput::kRmsNorm;
  constexpr GemvOutput kStore = GemvOutput::kStore;
  const bool norm = a.input == kNorm;
  if (a.output == GemvOutput::kResidualAdd)
    return launch_one<T, T, M, kPlain, GemvOutput::kResidualAdd, WK, RS>(p, blocks, smem, stream);
  if (a.output == GemvOutput::kSwiglu)
    return launch_one<T, T, M, kNorm, GemvOutput::kSwiglu, WK, RS>(p, blocks, smem, stream);
  if (a.output == GemvOutput::kRopeKv)
    return launch_one<T, T, M, kNorm, GemvOutput::kRopeKv, WK, RS>(p, blocks, smem, stream);
  if (a.out_dtype == DType::kF32)
    return norm ? launch_one<T, float, M, kNorm, kStore, WK, RS>(p, blocks, smem, stream)
                : launch_one<T, float, M, kPlain, kStore, WK, RS>(p, blocks, smem, stream);
  return norm ? launch_one<T, T, M, kNorm, kStore, WK, RS>(p, blocks, smem, stream)
              : launch_one<T, T, M, kPlain, kStore, WK, RS>(p, blocks, smem, stream);
}

// The launch for the weights WK (RS: with one scale per row) at a.m rows of a.dtype activations
// (decode_gemv() has checked the arguments); defined where instantiated.
template <GemvWeights WK, bool RS>
cudaError_t launch_weights(const DecodeGemvArgs& a, const Params& p, int blocks, size_t smem,
                           cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, {
    switch (a.m) {
      case 1:
        err = launch_m<T, 1, WK, RS>(a, p, blocks, smem, stream);
        break;
      case 2:
        err = launch_m<T, 2, WK, RS>(a, p, blocks, smem, stream);
        break;
      case 3:
        err = launch_m<T, 3, WK, RS>(a, p, blocks, smem, stream);
        break;
      default:
        err = launch_m<T, 4, WK, RS>(a, p, blocks, smem, stream);
    }
  });
  return err;
}

#define LATHE_DECODE_GEMV_EXTERN(WK, RS)                                                        \
  extern template cudaError_t launch_weights<WK, RS>(const DecodeGemvArgs&, const Params&, int, \
                                                     size_t, cudaStream_t);
LATHE_DECODE_GEMV_EXTERN(GemvWeights::kFp8, true)
LATHE_DECODE_GEMV_EXTERN(GemvWeights::kFp8, false)
LATHE_DECODE_GEMV_EXTERN(GemvWeights::kInt8, true)
LATHE_DECODE_GEMV_EXTERN(GemvWeights::kInt8, false)
#undef LATHE_DECODE_GEMV_EXTERN

}  // namespace lathe::cuda::decode_gemv_detail
