// The k-quant decode kernel (quant_gemv_kquants.cuh) for the unit layout's kinds (gguf_units.h):
// GGUF Q4_1, Q5_0, Q5_1, Q2_K and Q3_K, with every output (gemv_epilogue.h), both activation
// types. Apart from quant_linear_kquants.cu so that the two compile in parallel.
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_gemv_kquants.cuh"

namespace lathe::cuda::quant {

template <GemvOutput OUT>
cudaError_t launch_kquants_units(int kind, const KqLaunch& L, DType act, const void* x, int64_t m,
                                 cudaStream_t stream) {
  switch (kind) {
    case kQ4_1:
      return launch_kquants<kQ4_1, OUT>(L, act, x, m, stream);
    case kQ5_0:
      return launch_kquants<kQ5_0, OUT>(L, act, x, m, stream);
    case kQ5_1:
      return launch_kquants<kQ5_1, OUT>(L, act, x, m, stream);
    case kQ2K:
      return launch_kquants<kQ2K, OUT>(L, act, x, m, stream);
    case kQ3K:
      return launch_kquants<kQ3K, OUT>(L, act, x, m, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template cudaError_t launch_kquants_units<GemvOutput::kStore>(int, const KqLaunch&, DType,
                                                              const void*, int64_t, cudaStream_t);
template cudaError_t launch_kquants_units<GemvOutput::kResidualAdd>(int, const KqLaunch&, DType,
                                                                    const void*, int64_t,
                                                                    cudaStream_t);
template cudaError_t launch_kquants_units<GemvOutput::kSwiglu>(int, const KqLaunch&, DType,
                                                               const void*, int64_t, cudaStream_t);
template cudaError_t launch_kquants_units<GemvOutput::kRopeKv>(int, const KqLaunch&, DType,
                                                               const void*, int64_t, cudaStream_t);

}  // namespace lathe::cuda::quant
