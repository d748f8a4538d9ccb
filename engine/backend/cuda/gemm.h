// Dense matmuls through cuBLASLt: y[M, N] = x[M, K] · w[N, K]ᵀ with row-major x, w, y (a Linear
// layer with PyTorch-layout weights). In cuBLASLt's column-major terms this is D[N, M] = op(A)·B
// with A = w as a K x N column-major matrix, op(A) = Aᵀ ("TN"), B = x as K x M; D's column-major N
// x M is y's row-major M x N. bf16/f16 operands, float32 compute and scale, output in the operand
// type or float32 (logits). One algorithm per shape from cuBLASLt's heuristic, cached (the lookup
// costs microseconds, too much per call). A fixed workspace is passed on every call, so calls can
// be captured in CUDA graphs. FP8 (e4m3) operands with per-tensor scales: matmul_fp8 (cuBLASLt 13.1
// refuses its per-row/per-column "outer vector" scales on Hopper: docs/gpu-notes.md, run 40).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

class Gemm {
 public:
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

  static Result<std::unique_ptr<Gemm>> create();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x: [m, k] (row stride k), w: [n, k], y: [m, n] (row stride ldy; 0: n). dtype: bf16 or f16;
  // out_dtype: dtype or f32.
  Status matmul(DType dtype, DType out_dtype, const void* x, const void* w, void* y, int64_t m,
                int64_t n, int64_t k, cudaStream_t stream, int64_t ldy = 0);

  // W8A8 on FP8 tensor cores: y[i, j] = xs * ws * sum_k xq[i, k] * wq[j, k] with e4m3 xq [m, k]
  // and wq [n, k] (row-major, k % 16 == 0, 16-byte aligned) and per-tensor scales xs, ws (device
  // pointers to one f32 each); f32 accumulation, out_dtype bf16, f16 or f32. Needs FP8 tensor
  // cores (sm_89 or newer); "unsupported" when cuBLASLt has no algorithm (the caller then
  // dequantizes).
  Status matmul_fp8(DType out_dtype, const uint8_t* xq, const float* xs, const uint8_t* wq,
                    const float* ws, void* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream,
                    int64_t ldy = 0);

  int64_t device_bytes() const { return workspace_.bytes(); }

 private:
  Gemm() = default;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t>;
  // dtype kF8E4M3: the W8A8 plan (per-tensor scales).
  Result<const Plan*> plan_for(DType dtype, DType out_dtype, int64_t m, int64_t n, int64_t k,
                               int64_t ldy);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace lathe::cuda
