#include "engine/backend/cuda/decode_gemv.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/decode_gemv_kernel.cuh"

namespace lathe::cuda {
namespace {

using namespace decode_gemv_detail;

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
  const bool w8 = a.weights != GemvWeights::kAct;
  if ((!w8 && !aligned16(a.w)) || (a.input == GemvInput::kPlain && !aligned16(a.x)))
    return invalid_argument("decode_gemv: w and x must be 16-byte aligned");
  if (w8) {
    if (a.k % 16 != 0) return invalid_argument("decode_gemv: 8-bit weights need k % 16 == 0");
    LATHE_RETURN_IF_ERROR(check_w8("decode_gemv", a.w8, a.n));
  }
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
  p.w8 = w8_rows(a.w8, a.k);
  // One scale per row (per tensor or channel) takes the kernels whose loads keep each task's row
  // pointers (decode_gemv_kernel.cuh, RS).
  const bool rs = a.w8.scales.group_shift == 31;
  cudaError_t err = cudaSuccess;
  switch (a.weights) {
    case GemvWeights::kAct:
      err = launch_weights<GemvWeights::kAct, false>(a, p, blocks, smem, stream);
      break;
    case GemvWeights::kFp8:
      err = rs ? launch_weights<GemvWeights::kFp8, true>(a, p, blocks, smem, stream)
               : launch_weights<GemvWeights::kFp8, false>(a, p, blocks, smem, stream);
      break;
    case GemvWeights::kInt8:
      err = rs ? launch_weights<GemvWeights::kInt8, true>(a, p, blocks, smem, stream)
               : launch_weights<GemvWeights::kInt8, false>(a, p, blocks, smem, stream);
      break;
  }
  if (err != cudaSuccess) return cuda_error(err, "launch of decode_gemv_kernel");
  return check_launch("decode_gemv_kernel");
}

}  // namespace lathe::cuda
