#include "engine/backend/cuda/gemm.h"

#include "engine/core/strings.h"

namespace lathe::cuda {

Result<std::unique_ptr<Gemm>> Gemm::create() {
  std::unique_ptr<Gemm> g(new Gemm());
  LATHE_CUBLAS_TRY(cublasLtCreate(&g->handle_));
  LATHE_RETURN_IF_ERROR(g->workspace_.allocate(kWorkspaceBytes, "cuBLASLt workspace"));
  return g;
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

Result<const Gemm::Plan*> Gemm::plan_for(DType dtype, DType out_dtype, int64_t m, int64_t n,
                                         int64_t k, int64_t ldy) {
  const bool fp8 = dtype == DType::kF8E4M3;
  const Key key{static_cast<int>(dtype), static_cast<int>(out_dtype), m, n, k, ldy};
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;

  Plan p;
  auto fail = [&](Status s) {
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d != nullptr) cublasLtMatrixLayoutDestroy(p.d);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
    return s;
  };
  const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : cuda_data_type(dtype),
                       dt = cuda_data_type(out_dtype);
  cublasStatus_t st = cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return fail(cublas_error(st, "cublasLtMatmulDescCreate"));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b));
  st = cublasLtMatrixLayoutCreate(&p.a, ab, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st =
        cublasLtMatrixLayoutCreate(&p.b, ab, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&p.d, dt, static_cast<uint64_t>(n), static_cast<uint64_t>(m),
                                    ldy);
  if (st != CUBLAS_STATUS_SUCCESS) return fail(cublas_error(st, "cublasLtMatrixLayoutCreate"));

  cublasLtMatmulPreference_t pref = nullptr;
  st = cublasLtMatmulPreferenceCreate(&pref);
  if (st != CUBLAS_STATUS_SUCCESS) return fail(cublas_error(st, "cublasLtMatmulPreferenceCreate"));
  const uint64_t ws = static_cast<uint64_t>(workspace_.bytes());
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // An FP8 plan cuBLASLt refuses is "unsupported": the caller falls back to dequantizing.
  if (st != CUBLAS_STATUS_SUCCESS && fp8)
    return fail(unsupported("cuBLASLt takes no FP8 product of this shape here (" +
                            cublas_error(st, "cublasLtMatmulAlgoGetHeuristic").message() + ")"));
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return fail(
        st != CUBLAS_STATUS_SUCCESS
            ? cublas_error(st, "cublasLtMatmulAlgoGetHeuristic")
            : unsupported(strformat(
                  "cuBLASLt has no algorithm for a %s matmul of M=%lld N=%lld K=%lld",
                  fp8 ? "fp8" : std::string(dtype_name(dtype)).c_str(), static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k))));
  p.algo = result.algo;
  auto [pos, inserted] = plans_.emplace(key, p);
  return &pos->second;
}

Status Gemm::matmul(DType dtype, DType out_dtype, const void* x, const void* w, void* y, int64_t m,
                    int64_t n, int64_t k, cudaStream_t stream, int64_t ldy) {
  if (!is_act_dtype(dtype)) return invalid_argument("matmul: operands must be bf16 or f16");
  if (out_dtype != dtype && out_dtype != DType::kF32)
    return invalid_argument("matmul: output must be the operand dtype or f32");
  if (m <= 0 || n <= 0) return Status();
  if (ldy <= 0) ldy = n;
  if (ldy < n) return invalid_argument("matmul: the output row stride is shorter than a row");
  LATHE_ASSIGN_OR_RETURN(const Plan* p, plan_for(dtype, out_dtype, m, n, k, ldy));
  const float alpha = 1.0f, beta = 0.0f;
  LATHE_CUBLAS_TRY(cublasLtMatmul(handle_, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->d, y,
                                  p->d, &p->algo, workspace_.get(),
                                  static_cast<size_t>(workspace_.bytes()), stream));
  return Status();
}

Status Gemm::matmul_fp8(DType out_dtype, const uint8_t* xq, const float* xs, const uint8_t* wq,
                        const float* ws, void* y, int64_t m, int64_t n, int64_t k,
                        cudaStream_t stream, int64_t ldy) {
  if (!is_act_dtype(out_dtype) && out_dtype != DType::kF32)
    return invalid_argument("matmul_fp8: output must be bf16, f16 or f32");
  if (k % 16 != 0) return invalid_argument("matmul_fp8: k must be a multiple of 16");
  if (m <= 0 || n <= 0) return Status();
  if (ldy <= 0) ldy = n;
  if (ldy < n) return invalid_argument("matmul_fp8: the output row stride is shorter than a row");
  LATHE_ASSIGN_OR_RETURN(const Plan* p, plan_for(DType::kF8E4M3, out_dtype, m, n, k, ldy));
  // The scale vectors differ per call: set on the plan's descriptor before each product (a
  // host-side attribute, read when the product is enqueued).
  const void* a_scale = ws;
  const void* b_scale = xs;
  LATHE_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                  &a_scale, sizeof(a_scale)));
  LATHE_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                  &b_scale, sizeof(b_scale)));
  const float alpha = 1.0f, beta = 0.0f;
  LATHE_CUBLAS_TRY(cublasLtMatmul(handle_, p->desc, &alpha, wq, p->a, xq, p->b, &beta, y, p->d, y,
                                  p->d, &p->algo, workspace_.get(),
                                  static_cast<size_t>(workspace_.bytes()), stream));
  return Status();
}

}  // namespace lathe::cuda
