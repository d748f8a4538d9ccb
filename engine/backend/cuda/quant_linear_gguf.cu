// The quantized linear kernels for the GGUF block types (quant_linear.h).
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_kernels.cuh"

namespace lathe::cuda::quant {

cudaError_t gemv_gguf(int kind, const QuantPart& p, DType act, const void* x, DType out_dtype,
                      void* y, int64_t ldy, int64_t m, cudaStream_t stream) {
  switch (kind) {
    case kQ8_0:
      return launch_gemv<kQ8_0>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ4_0:
      return launch_gemv<kQ4_0>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ4_1:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ4_1>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ5_0:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ5_0>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ5_1:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ5_1>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ2K:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ2K>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ3K:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ3K>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ4K:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ4K>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ5K:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ5K>(p, act, x, out_dtype, y, ldy, m, stream);
    case kQ6K:
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kQ6K>(p, act, x, out_dtype, y, ldy, m, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t dequantize_gguf(int kind, const QuantPart& p, DType act, void* out, int64_t r0,
                            int64_t r1, cudaStream_t stream) {
  switch (kind) {
    case kQ8_0:
      return launch_dequantize<kQ8_0>(p, act, out, r0, r1, stream);
    case kQ4_0:
      return launch_dequantize<kQ4_0>(p, act, out, r0, r1, stream);
    case kQ4_1:
      return launch_dequantize<kQ4_1>(p, act, out, r0, r1, stream);
    case kQ5_0:
      return launch_dequantize<kQ5_0>(p, act, out, r0, r1, stream);
    case kQ5_1:
      return launch_dequantize<kQ5_1>(p, act, out, r0, r1, stream);
    case kQ2K:
      return launch_dequantize<kQ2K>(p, act, out, r0, r1, stream);
    case kQ3K:
      return launch_dequantize<kQ3K>(p, act, out, r0, r1, stream);
    case kQ4K:
      return launch_dequantize<kQ4K>(p, act, out, r0, r1, stream);
    case kQ5K:
      return launch_dequantize<kQ5K>(p, act, out, r0, r1, stream);
    case kQ6K:
      return launch_dequantize<kQ6K>(p, act, out, r0, r1, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace lathe::cuda::quant
