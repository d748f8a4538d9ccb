// Random weights in a quantized format, for `--load-format dummy --quantization fp8|int8|int4` on
// the CUDA backend (the memory and speed of a format at a real model's shape without its file). The
// layer projections take the formats --quantization makes of a 16-bit checkpoint
// (weight_scheme_online.cpp: fp8 e4m3 with one scale per tensor, int8 with one f16 scale per output
// channel, int4 symmetric in groups of 128 with f16 scales), their codes drawn at random on the
// device and their scales set so that the weights spread about as the 16-bit dummy's do (std
// ~0.02). The values are not the CPU's dummy weights: such runs measure speed and memory, not
// parity. Embedding, LM head and norms are the 16-bit dummy's.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "engine/backend/cuda/quant_linear.h"
#include "engine/backend/cuda/weight_repack.h"
#include "engine/core/status.h"
#include "engine/model/checkpoint_quant.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

// The description (format, shape, scale layout; no data) of an n x k projection part in `mode`'s
// format, to plan and describe it like a part read from a file.
WeightMatrix dummy_quant_matrix(OnlineQuant mode, const std::string& name, int64_t n, int64_t k);

// Fills a planned part on the device (`s`: its repack shape): random codes from (seed, stream_id),
// constant scales.
Status fill_dummy_quant_part(const QuantPart& part, const RepackShape& s, uint64_t seed,
                             uint64_t stream_id, cudaStream_t stream);

}  // namespace lathe::cuda
