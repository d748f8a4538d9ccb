// The streaming W4A16 decode kernel's ring depth (quant_gemv_stream.cu), host side: what a launch
// uses, for tests and tools (the kernel's own header is device code).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/quant_linear.h"

namespace lathe::cuda::quant {

// Ring stages per warp of a launch of part p (4-bit, tile layout) at batch m, for a product of
// `tasks` tasks (two 16-row tiles each; 0: unknown, as when the dispatcher asks whether the kernel
// takes a call), on a GPU of sm_count multiprocessors with smem_per_sm bytes of shared memory each
// (the opt-in limit per block + the 1 KB the system keeps). p.int4_stream_stages, or fewer where
// p.int4_stream_fit and the blocks a multiprocessor gets would not fit its shared memory together;
// a multiprocessor gets p.int4_stream_blocks blocks, or fewer where the product has fewer tasks
// than that many per multiprocessor (one when `tasks` is 0).
int32_t stream_ring_stages(const QuantPart& p, int64_t m, int64_t tasks, int64_t smem_per_sm,
                           int sm_count);

}  // namespace lathe::cuda::quant
