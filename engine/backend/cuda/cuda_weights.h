// The model's weights on the GPU, uploaded once: matrices in the runner's dtype (bf16 or f16), norm
// weights and biases in float32. Q/K/V are fused into one [(Hq + 2 Hkv) * D, hidden] matrix (rows
// of q, then k, then v) and gate/up into one [2 * intermediate, hidden] matrix (gate rows first),
// so a layer runs two projections where the unfused model runs five. Everything lives in one device
// allocation.
//
// Sources: f32/f16/bf16 tensors are copied and converted on the device; GGUF block-quantized
// tensors are dequantized on the host (dequantize_rows, in parallel) to float32 and converted on
// the device, through double-buffered page-locked staging so that host work overlaps the copies.
// ModelFormat::kDummy: seeded random weights generated on the device (random_fill.h), the same
// values as the CPU backend's dummy weights for the same seed; norm weights 1, biases 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe {
struct LoadedModel;
}

namespace lathe::cuda {

struct DeviceLayer {
  void* qkv = nullptr;         // [(Hq + 2 Hkv) * D, hidden]
  void* o = nullptr;           // [hidden, Hq * D]
  void* gate_up = nullptr;     // [2 * intermediate, hidden]
  void* down = nullptr;        // [hidden, intermediate]
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
  void* token_embd = nullptr;    // [vocab, hidden]
  void* lm_head = nullptr;       // [vocab, hidden]; token_embd when tied
  float* output_norm = nullptr;  // [hidden]
  std::vector<DeviceLayer> layers;
};

// `dummy_seed` is used for ModelFormat::kDummy only. Synchronizes `stream` before returning.
Result<DeviceWeights> upload_weights(const LoadedModel& model, DType dtype, uint64_t dummy_seed,
                                     cudaStream_t stream);

}  // namespace lathe::cuda
