// Random weights in a quantized format, for `--load-format dummy --quantization ...` on the CUDA
// backend (the memory and speed of a format at a real model's shape without its file):
//  - fp8|int8|int4: the layer projections take the formats --quantization makes of a 16-bit
//    checkpoint (weight_scheme_online.cpp: fp8 e4m3 with one scale per tensor, int8 with one f16
//    scale per output channel, int4 symmetric in groups of 128 with f16 scales); embedding and LM
//    head stay 16-bit, as with vLLM's --quantization;
//  - GGUF types (engine/model/dummy_gguf.h: q4_k_m, q4_k, q4_0, q8_0, q5_k_m, q6_k, q4_1, q5_0,
//    q5_1, q2_k, q3_k): every layer
//    projection and the untied LM head in the block type a file of that type has, kept as a GGUF
//    file's tensors are (WeightFormat::kGguf parts of [n, k / block] blocks, row after row, as
//    cuda_weights uploads a file's bytes), so the same kernels run as on the file.
// Codes are drawn at random on the device; scales are constants set so that the weights spread
// about as the 16-bit dummy's do (std ~0.02). The values are not the CPU's dummy weights: such runs
// measure speed and memory, not parity. The embedding and norms are the 16-bit dummy's.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "engine/backend/cuda/quant_linear.h"
#include "engine/backend/cuda/weight_repack.h"
#include "engine/core/status.h"
#include "engine/model/checkpoint_quant.h"
#include "engine/model/layer_weights.h"
#include "engine/model/loaded_model.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

// Whether a dummy model's projections are quantized (--quantization fp8|int8|int4 or a GGUF type).
bool has_dummy_quant(const LoadedModel& model);

// The descriptions (format, shape, scale layout; no data) of a dummy model's quantized parts, to
// plan and describe them like parts read from a file: layers[i] as a checkpoint's layer (q, k, v;
// o; gate, up; down), lm_head with one part where the format stores the LM head (GGUF types,
// untied models), else no parts (16-bit). kUnsupported where a GGUF type does not fit a width.
struct DummyQuantWeights {
  std::vector<LayerWeights> layers;
  LinearGroup lm_head;
  std::string description;  // for the log: "q4_k+q6_k layer projections, LM head q6_k"
};
Result<DummyQuantWeights> dummy_quant_weights(const LoadedModel& model);

// The description of an n x k projection part in `mode`'s format.
WeightMatrix dummy_quant_matrix(OnlineQuant mode, const std::string& name, int64_t n, int64_t k);
// The description of an n x k part of GGUF blocks of `type` (k a multiple of its block size).
WeightMatrix dummy_gguf_matrix(DType type, const std::string& name, int64_t n, int64_t k);

// Fills a planned part `m` on the device (`part`: its device description as uploaded, int4_tiles
// as planned): random codes from (seed, stream_id), constant scales (GGUF: gguf_dummy_block's
// bytes in every block). A GGUF part's random bytes run up to the next multiple of 4 bytes, which
// the 256-byte aligned plan always holds. A Q8_0 / Q4_0 part planned in the integer row layout
// (part.format kInt, gguf_repack.h) gets random codes and the blocks' constant d as every scale:
// the same weight distribution as the blocks.
Status fill_dummy_quant_part(const WeightMatrix& m, const QuantPart& part, bool int4_tiles,
                             uint64_t seed, uint64_t stream_id, cudaStream_t stream);

}  // namespace lathe::cuda
