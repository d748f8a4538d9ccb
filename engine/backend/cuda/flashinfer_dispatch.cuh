// FlashInfer's batch paged prefill, one function per (dtype, head_dim) instantiation set; each
// lives in its own translation unit (prefill_attention_<dtype>_<head_dim>.cu) so that they compile
// in parallel. Internal to prefill_attention.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <flashinfer/attention/default_prefill_params.cuh>

namespace lathe::cuda::fi {

template <typename T>
using Params = flashinfer::BatchPrefillPagedParams<T, T, T, int32_t>;

// Runs the causal FA2 kernel with the plan's CTA_TILE_Q (16, 64 or 128).
cudaError_t prefill_bf16_64(Params<__nv_bfloat16>& p, __nv_bfloat16* tmp_v, float* tmp_s,
                            uint32_t cta_tile_q, cudaStream_t stream);
cudaError_t prefill_bf16_128(Params<__nv_bfloat16>& p, __nv_bfloat16* tmp_v, float* tmp_s,
                             uint32_t cta_tile_q, cudaStream_t stream);
cudaError_t prefill_f16_64(Params<__half>& p, __half* tmp_v, float* tmp_s, uint32_t cta_tile_q,
                           cudaStream_t stream);
cudaError_t prefill_f16_128(Params<__half>& p, __half* tmp_v, float* tmp_s, uint32_t cta_tile_q,
                            cudaStream_t stream);

}  // namespace lathe::cuda::fi

// Body of one instantiation TU: NAME(T, HEAD_DIM) dispatches the plan's tile size.
#define LATHE_FLASHINFER_PREFILL_INSTANCE(NAME, T, HEAD_DIM)                                      \
  namespace lathe::cuda::fi {                                                                     \
  cudaError_t NAME(Params<T>& p, T* tmp_v, float* tmp_s, uint32_t cta_tile_q,                     \
                   cudaStream_t stream) {                                                         \
    using Variant = flashinfer::DefaultAttention</*custom_mask=*/false, /*sliding_window=*/false, \
                                                 /*logits_soft_cap=*/false, /*alibi=*/false>;     \
    switch (cta_tile_q) {                                                                         \
      case 16:                                                                                    \
        return flashinfer::BatchPrefillWithPagedKVCacheDispatched<                                \
            true, 16, HEAD_DIM, HEAD_DIM, flashinfer::PosEncodingMode::kNone, false,              \
            flashinfer::MaskMode::kCausal, false, Variant, Params<T>>(p, tmp_v, tmp_s, false,     \
                                                                      stream);                    \
      case 64:                                                                                    \
        return flashinfer::BatchPrefillWithPagedKVCacheDispatched<                                \
            true, 64, HEAD_DIM, HEAD_DIM, flashinfer::PosEncodingMode::kNone, false,              \
            flashinfer::MaskMode::kCausal, false, Variant, Params<T>>(p, tmp_v, tmp_s, false,     \
                                                                      stream);                    \
      case 128:                                                                                   \
        return flashinfer::BatchPrefillWithPagedKVCacheDispatched<                                \
            true, 128, HEAD_DIM, HEAD_DIM, flashinfer::PosEncodingMode::kNone, false,             \
            flashinfer::MaskMode::kCausal, false, Variant, Params<T>>(p, tmp_v, tmp_s, false,     \
                                                                      stream);                    \
      default:                                                                                    \
        return cudaErrorInvalidValue;                                                             \
    }                                                                                             \
  }                                                                                               \
  }
