// The model's weights on the GPU, uploaded once from the bound ModelWeights (engine/model/
// layer_weights.h): each projection a DeviceLinear, the norm weights and biases in float32. Q/K/V
// are one [(Hq + 2 Hkv) * D, hidden] matrix (rows of q, then k, then v) and gate/up one
// [2 * intermediate, hidden] matrix (gate rows first), as the forward plan groups them, so a layer
// runs two projections where the unfused model runs five. Everything lives in one device
// allocation.
//
// Formats: a DeviceLinear says the format its kernels read (LinearDispatcher dispatches on it,
// linear.h). f32/f16/bf16 projections are one dense matrix of the runner's dtype, copied and
// converted on the device. A projection with a quantized part keeps every part in its stored
// format (QuantPart, quant_linear.h: GGUF blocks copied as they are, except Q8_0 and Q4_0,
// converted into the integer row layout, gguf_repack.h; a 16-bit part of it as rows of the runner's
// dtype; plan_projection() below), unless CudaSwitches::native_formats is off, which dequantizes
// GGUF blocks on the host (dequantize_rows, in parallel) and uploads dense. Staging:
// weight_uploader.h. `source` keeps the checkpoint's format for reports. The token embedding is
// always dense (the embedding kernel reads rows), and a tied LM head shares it.
// ModelFormat::kDummy: seeded random weights generated on the device (random_fill.h) in the streams
// of dummy_matrix_order(), the same values as the CPU backend's for the same seed; norm weights 1,
// biases 0. With --quantization (fp8|int8|int4, or a GGUF type of engine/model/dummy_gguf.h) the
// layer projections, and for GGUF types the untied LM head, are planned as dummy_quant.h describes
// them and filled with random codes and constant scales.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/forward_plan.h"
#include "engine/model/weight_matrix.h"
#include "engine/runtime/parallel.h"

namespace lathe {
struct LinearGroup;
struct LoadedModel;
}  // namespace lathe

namespace lathe::cuda {

// One projection as its kernels read it: y[m, n] = x[m, k] · w[n, k]ᵀ. Dense (`w`, one matrix of
// the activation dtype: f32/f16/bf16 checkpoints) or kept in its stored format(s): `parts`, each a
// range of output rows in one format (quant_linear.h; q|k|v of a GGUF Q4_K_M file are q4_k, q4_k
// and q6_k).
struct DeviceLinear {
  WeightFormat format = WeightFormat::kDense;  // kDense: `w`; else the (first) stored format
  DType dtype = DType::kBF16;                  // element type of `w` (kDense)
  const void* w = nullptr;                     // [n, k] (kDense)
  std::vector<QuantPart> parts;                // the stored parts (not kDense), rows in order
  int64_t n = 0, k = 0;
  std::string name;    // "qkv_proj", "lm_head" (reports, autotune tables)
  std::string source;  // the checkpoint's format(s): "bf16", "q4_k+q6_k"
};

struct DeviceLayer {
  DeviceLinear qkv;            // [(Hq + 2 Hkv) * D, hidden]
  DeviceLinear o;              // [hidden, Hq * D]
  DeviceLinear gate_up;        // [2 * intermediate, hidden]
  DeviceLinear down;           // [hidden, intermediate]
  float* attn_norm = nullptr;  // [hidden]
  float* ffn_norm = nullptr;   // [hidden]
  float* q_bias = nullptr;     // [Hq * D] (attention_bias), else null
  float* k_bias = nullptr;     // [Hkv * D]
  float* v_bias = nullptr;     // [Hkv * D]
  float* q_norm = nullptr;     // [D] (qk_norm), else null
  float* k_norm = nullptr;     // [D]
};

struct DeviceWeights {
  DType dtype = DType::kBF16;
  DeviceBuffer storage;
  void* token_embd = nullptr;    // [vocab, hidden] of dtype
  DeviceLinear lm_head;          // [vocab, hidden]; token_embd's memory when tied
  float* output_norm = nullptr;  // [hidden]
  std::vector<DeviceLayer> layers;

  // The projection of the plan's slot in layer `layer` (the LM head for LinearSlot::kLmHead).
  const DeviceLinear& linear(int64_t layer, LinearSlot slot) const;
};

// How upload_weights stores one projection of n outputs and k inputs. `stored`: one of its parts is
// quantized and native_formats is on, so every part keeps its stored format, `part_bytes` each (in
// part order; GGUF blocks as in the file, every block type the kernels take, quant_linear.h;
// integer and FP8 parts as repacked, weight_repack.h; a 16-bit part as rows of the activation
// dtype); else one dense [n, k] matrix of the activation dtype, `dense_bytes`. Host-side only.
struct ProjectionStorage {
  bool stored = false;
  int64_t dense_bytes = 0;
  std::vector<int64_t> part_bytes;
  int64_t bytes() const;  // all of it, before the allocation's 256-byte alignment of each piece
};

// g: the checkpoint's projection, or null (a 16-bit dummy projection: dense). act_bytes: bytes per
// activation element (2). Errors (kUnsupported / kInvalidArgument, naming the tensor): a stored
// part the kernels do not take (quant_part_supported: block type, group size, k % 32) or whose
// repacked shape is not valid.
// gguf_repack: GGUF Q8_0 / Q4_0 parts planned in the integer row layout (gguf_repack.h; their
// part_bytes those of the codes and scales, each piece 256-byte aligned).
Result<ProjectionStorage> plan_projection(const LinearGroup* g, int64_t n, int64_t k,
                                          int64_t act_bytes, bool native_formats,
                                          bool gguf_repack = true);

// `dummy_seed` is used for ModelFormat::kDummy only. World size 1 only (parallel). native_formats:
// projections with a quantized part keep their stored formats (else every projection is uploaded
// dense, GGUF blocks dequantized). int4_tiles: 4-bit codes in the tensor-core tile layout where
// they fit (int4_tiles.h; else the row layout). gguf_repack: GGUF Q8_0 / Q4_0 parts converted
// into the integer row layout (gguf_repack.h; files on the host, dummies filled in it; a log line
// says which GGUF types run in which layout). check_fits: called with the bytes the weights take
// on the device before anything is allocated; its error (check_weights_fit's: the numbers and
// what to do) is returned as is. Synchronizes `stream` before returning.
Result<DeviceWeights> upload_weights(const LoadedModel& model, DType dtype, uint64_t dummy_seed,
                                     const ParallelConfig& parallel, bool native_formats,
                                     bool int4_tiles, bool gguf_repack, cudaStream_t stream,
                                     const std::function<Status(int64_t)>& check_fits);

}  // namespace lathe::cuda
