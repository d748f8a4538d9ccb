// decode_gemv's kernels on INT8 parts with one scale per row (decode_gemv_kernel.cuh, RS), apart
// so that they compile in parallel with the others.
#include "engine/backend/cuda/decode_gemv_kernel.cuh"

namespace lathe::cuda::decode_gemv_detail {

template cudaError_t launch_weights<GemvWeights::kInt8, true>(const DecodeGemvArgs&, const Params&,
                                                              int, size_t, cudaStream_t);

}  // namespace lathe::cuda::decode_gemv_detail
