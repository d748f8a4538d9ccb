// FlashInfer FA2 causal paged prefill, f16, head_dim 128 (see flashinfer_dispatch.cuh).
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/variants.cuh>

#include "engine/backend/cuda/flashinfer_dispatch.cuh"

LATHE_FLASHINFER_PREFILL_INSTANCE(prefill_f16_128, __half, 128)
