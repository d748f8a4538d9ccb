// FlashInfer FA2 causal paged prefill, bf16, head_dim 64 (see flashinfer_dispatch.cuh).
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/variants.cuh>

#include "engine/backend/cuda/flashinfer_dispatch.cuh"

LATHE_FLASHINFER_PREFILL_INSTANCE(prefill_bf16_64, __nv_bfloat16, 64)
