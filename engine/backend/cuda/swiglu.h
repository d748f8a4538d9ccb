// SwiGLU over the fused gate/up projection: out[t, i] = silu(g) * u with g = gate_up[t, i],
// u = gate_up[t, inter + i], silu(g) = g / (1 + exp(-g)), in float32 (cpu::swiglu's formula).
//   gate_up: [num_tokens, 2 * inter] of `dtype` (gate rows first in the fused weight, so gate
//   outputs come first); out: [num_tokens, inter] of `dtype`.
// Launch: grid (num_tokens, ceil(inter / 1024)), 128 threads, 8 elements per thread when
// inter % 8 == 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

Status swiglu(DType dtype, const void* gate_up, void* out, int64_t num_tokens, int64_t inter,
              cudaStream_t stream);

}  // namespace lathe::cuda
