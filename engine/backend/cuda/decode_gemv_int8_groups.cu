// decode_gemv's kernels on INT8 parts with group or block scales (decode_gemv_kernel.cuh), apart
// so that they compile in parallel with the others.
#include "engine/backend/cuda/decode_gemv_kernel.cuh"

namespace lathe::cuda::decode_gemv_detail {

template cudaError_t launch_weights<GemvWeights::kInt8, false>(const DecodeGemvArgs&, const Params&,
                                                               int, size_t, cudaStream_t);

}  // namespace lathe::cuda::decode_gemv_detail
