// Linear layers on the GPU: y[M, N] = x[M, K] · w[N, K]ᵀ, dispatched on the weight's format and the
// batch size M (format × batch bucket → kernel):
//   kDense (the activation dtype): the bandwidth-bound gemv kernel (M <= kGemvMaxM) or cuBLASLt.
//     The choice for M <= kGemvMaxM is measured once at load (autotune(): both timed with CUDA
//     events on the real weights) and kept in a table; larger M always goes to cuBLASLt. Before
//     autotune, gemv serves M <= 2.
//   stored formats (DeviceLinear::parts, quant_linear.h): FP8 and 8-bit integer projections at
//     M <= 4 (below the W8A8 batch, below), the fused decode kernel on all parts in one launch with
//     the epilogues and the RMSNorm input (quant_gemv_w8_parts, W8A16); M <= kQuantGemvMaxM,
//     quant_gemv per part
//     (the weights dequantized in registers), or all 4-bit tiled parts in one launch of two tiles
//     per block with the SwiGLU / RoPE-KV epilogue (quant_gemv_tile_pairs); 4-bit tiled parts up to
//     their int4_gemm_max_m, the W4A16 GEMM kernel (quant_gemm_int4); else the parts
//     dequantized into a workspace in the activation dtype (in slabs of rows when the projection is
//     larger than it) and one cuBLASLt GEMM per slab. FP8 parts with per-tensor scales from the
//     set_fp8_gemm() batch on: W8A8 instead (activations quantized with one dynamic scale, one FP8
//     cuBLASLt product per part). A format without a kernel is refused at upload, by name.
// Epilogues are a policy of the call (gemv_epilogue.h): a caller that wants SwiGLU or RoPE/KV done
// on the product asks takes_epilogue(); when the kernel chosen for (format, M) can apply it, run()
// with that epilogue does the whole thing in one kernel, else the caller stores and runs the
// epilogue's own kernel.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cuda/cuda_weights.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// One autotuned (shape, M): both timings, in microseconds.
struct LinearTiming {
  std::string name;
  int64_t n = 0, k = 0, m = 0;
  double gemv_us = 0, cublas_us = 0;
  bool use_gemv = false;
};

// The autotune's rule at M tokens: at M <= 2, gemv unless cuBLASLt is faster by more than
// kGemvTieMargin; above, the faster. Timed alone the two often tie within noise at M = 1 (o_proj of
// Llama-3.1-8B: 10.4-10.5 us against 10.3-10.5), but in a decode step gemv runs under programmatic
// dependent launch, its first weights requested while the previous kernel finishes, which a launch
// alone does not show: a tie that went to cuBLASLt cost 4% of a batch-1 step on the H200
// (docs/gpu-notes.md). At M = 4 the margin made the step 2.5% slower (gemv kept where cuBLASLt
// was a few percent faster), so it is not applied there.
constexpr double kGemvTieMargin = 0.10;
inline bool gemv_wins(int64_t m, double gemv_us, double cublas_us) {
  return m <= 2 ? cublas_us >= gemv_us * (1.0 - kGemvTieMargin) : gemv_us < cublas_us;
}

class LinearDispatcher {
 public:
  // dtype: the activations'. gemv_epilogues: whether gemv may take the SwiGLU and RoPE/KV epilogues
  // (CudaSwitches::gemv_epilogues).
  LinearDispatcher(Gemm* gemm, DType dtype, bool gemv_epilogues)
      : gemm_(gemm), dtype_(dtype), gemv_epilogues_(gemv_epilogues) {}

  // y = x · wᵀ (out_dtype: the activation dtype or f32), then `output` on the product when it is
  // not kStore (only where takes_epilogue() said yes).
  // kResidualAdd: y is the f32 residual [m, n]. norm: x is the RMSNorm of norm->residual, built by
  // the kernel (only where takes_norm_input() said yes; x unused).
  Status run(const DeviceLinear& w, DType out_dtype, const void* x, void* y, int64_t m,
             cudaStream_t stream, GemvOutput output = GemvOutput::kStore,
             const GemvRopeKv& rope = {}, const TileNormInput* norm = nullptr) const;
  // Whether run() can take the RMSNorm input for this product with `output` (stored formats at
  // decode batches whose kernel builds x itself: 4-bit tiles, 8-bit parts, k-quants where on).
  // An output taken with the norm input may not be taken with a plain one (takes_epilogue()).
  bool takes_norm_input(const DeviceLinear& w, int64_t m, GemvOutput output,
                        const GemvRopeKv* rope = nullptr) const;
  // Whether run() can apply `output` (kSwiglu, kRopeKv; kResidualAdd on stored parts) to this
  // product of a plain input in one kernel (stored formats: kRopeKv's parameters in `rope`, which
  // decide how 4-bit tiles pair their rows).
  bool takes_epilogue(const DeviceLinear& w, int64_t m, GemvOutput output,
                      const GemvRopeKv* rope = nullptr) const;

  // x_scratch: kGemvMaxM * max k elements; y_scratch: kGemvMaxM * max n floats. Contents are
  // overwritten (x is filled with a constant, never zeros).
  Status autotune(const std::vector<std::pair<DeviceLinear, DType>>& shapes, void* x_scratch,
                  void* y_scratch, cudaStream_t stream);
  const std::vector<LinearTiming>& timings() const { return timings_; }
  // The workspace of the dequantize-then-GEMM path (stored formats at M > kQuantGemvMaxM): `bytes`
  // of device memory the dispatcher may overwrite on its stream.
  void set_dequant_workspace(void* ws, int64_t bytes) {
    dequant_ws_ = ws;
    dequant_ws_bytes_ = bytes;
  }
  // FP8 parts with per-tensor scales above kQuantGemvMaxM: W8A8 on FP8 tensor cores (activations
  // quantized with one dynamic scale into the dequantization workspace, one cuBLASLt FP8 product
  // per part) instead of W8A16.
  // decode_max_k > 0: projections of k <= decode_max_k stay on W8A16 up to kDecodeGemvMaxM rows.
  void set_fp8_gemm(bool on, int32_t min_m = kQuantGemvMaxM + 1, int32_t decode_max_k = 0) {
    fp8_gemm_ = on;
    fp8_gemm_min_m_ = min_m;
    fp8_decode_max_k_ = decode_max_k;
  }
  // Whether run() serves this stored product with the W8A8 path.
  bool fp8_gemm_takes(const DeviceLinear& w, int64_t m) const;
  // Whether run() serves these 8-bit parts on the fused decode kernel (W8A8 first where it
  // applies; norm: with the RMSNorm input).
  bool w8_decode_takes(const DeviceLinear& w, int64_t m, GemvOutput output, const GemvRopeKv* rope,
                       bool norm) const;
  // Whether run() serves this product with gemv.
  bool use_gemv(const DeviceLinear& w, DType out_dtype, int64_t m) const;

 private:
  using Key = std::tuple<int64_t, int64_t, int>;
  Status check_format(const DeviceLinear& w) const;
  Status run_stored(const DeviceLinear& w, DType out_dtype, const void* x, void* y, int64_t m,
                    cudaStream_t stream) const;
  Status run_fp8(const DeviceLinear& w, DType out_dtype, const void* x, void* y, int64_t m,
                 cudaStream_t stream) const;

  Gemm* gemm_;
  DType dtype_;
  bool gemv_epilogues_;
  bool fp8_gemm_ = false;
  int32_t fp8_gemm_min_m_ = kQuantGemvMaxM + 1;  // the smallest batch that takes W8A8
  int32_t fp8_decode_max_k_ = 0;                 // see set_fp8_gemm
  // Set when cuBLASLt had no W8A8 algorithm (said once; FP8 then dequantizes as before).
  mutable bool fp8_gemm_failed_ = false;
  void* dequant_ws_ = nullptr;
  int64_t dequant_ws_bytes_ = 0;
  std::map<Key, std::array<bool, kGemvMaxM + 1>> table_;
  std::vector<LinearTiming> timings_;
};

}  // namespace lathe::cuda
