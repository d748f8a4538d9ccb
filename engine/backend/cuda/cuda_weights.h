// The model's weights on the GPU, uploaded once from the bound ModelWeights (engine/model/
// layer_weights.h): each projection a DeviceLinear, the norm weights and biases in float32. Q/K/V
// are one [(Hq + 2 Hkv) * D, hidden] matrix (rows of q, then k, then v) and gate/up one
// [2 * intermediate, hidden] matrix (gate rows first), as the forward plan groups them, so a layer
// runs two projections where the unfused model runs five. Everything lives in one device
// allocation.
//
// Formats: a DeviceLinear says the format its kernels read (LinearDispatcher dispatches on it,
// linear.h). Every checkpoint format is uploaded as a dense matrix of the runner's dtype today:
// f32/f16/bf16 tensors are copied and converted on the device; GGUF block-quantized tensors are
// dequantized on the host (dequantize_rows, in parallel) to float32 and converted on the device,
// through double-buffered page-locked staging so that host work overlaps the copies. `source`
// keeps the checkpoint's format for reports. A native kernel for a format (issue 13) is an upload
// that keeps it, plus its entry in the dispatcher.
// ModelFormat::kDummy: seeded random weights generated on the device (random_fill.h) in the streams
// of dummy_matrix_order(), the same values as the CPU backend's for the same seed; norm weights 1,
// biases 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/forward_plan.h"
#include "engine/model/weight_matrix.h"
#include "engine/runtime/parallel.h"

namespace lathe {
struct LoadedModel;
}

namespace lathe::cuda {

// One projection as its kernels read it: y[m, n] = x[m, k] · w[n, k]ᵀ.
struct DeviceLinear {
  WeightFormat format = WeightFormat::kDense;  // of `w` on the device
  DType dtype = DType::kBF16;                  // element type of `w` (kDense)
  const void* w = nullptr;                     // [n, k]
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

// `dummy_seed` is used for ModelFormat::kDummy only. World size 1 only (parallel). Synchronizes
// `stream` before returning.
Result<DeviceWeights> upload_weights(const LoadedModel& model, DType dtype, uint64_t dummy_seed,
                                     const ParallelConfig& parallel, cudaStream_t stream);

}  // namespace lathe::cuda
