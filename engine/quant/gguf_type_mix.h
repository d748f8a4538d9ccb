// Which ggml type each tensor of a GGUF file gets for a llama.cpp file type, following
// llama_tensor_get_type() in llama.cpp's src/llama-quant.cpp (no importance matrix, no manual
// overrides, dense models: llama, qwen2, qwen3):
//   - only 2-D tensors whose name ends in "weight" and is not a norm ("_norm.weight") are
//     quantized; the rest keep a float type (written as f32);
//   - output.weight, and token_embd.weight when the embeddings are tied (no output.weight), get
//     q6_k, unless the file type's base is q8_0 (then q8_0) or the row length is not a multiple of
//     the base type's block (then q8_0);
//   - q4_k_m: attn_v (counted over the attn_v tensors) and ffn_down (by layer) get q6_k in the
//     "use_more_bits" layers: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2; q5_k_m likewise;
//   - 70B models (80 layers, grouped-query attention): attn_v's q4_k becomes q5_k;
//   - everything else gets the file type's base type (q8_0, q4_0, q6_k, q4_k, q5_k);
//   - a type whose block does not divide the row length falls back: q4_k -> q5_0, q5_k -> q5_1,
//     q6_k -> q8_0; a 32-weight type that still does not fit -> f16.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/core/dtype.h"

namespace lathe {

// llama.cpp's llama_ftype values of the file types Lathe writes (general.file_type).
enum class GgufFileType : uint32_t {
  kQ4_0 = 2,
  kQ8_0 = 7,
  kQ4_K_M = 15,
  kQ5_K_M = 17,
  kQ6_K = 18,
};

// "q4_0", "q8_0", "q4_k_m", "q5_k_m", "q6_k" <-> the file type; names are case-insensitive.
std::optional<GgufFileType> parse_gguf_file_type(std::string_view name);
const char* gguf_file_type_name(GgufFileType t);
// The type most tensors get (q4_k for q4_k_m).
DType gguf_file_type_base(GgufFileType t);

// One tensor as llama.cpp's rules see it.
struct GgufTensorQuery {
  std::string_view name;         // GGUF name: "blk.3.attn_v.weight", "output.weight", ...
  int n_dims = 2;                // ggml dims
  int64_t row_length = 0;        // ne[0]: the contiguous dimension (PyTorch's last)
  int64_t layer = -1;            // index of the tensor among its kind (== the block index here)
  int64_t num_layers = 0;        // block_count (the number of attn_v / ffn_down tensors)
  bool tied_embeddings = false;  // the file has no output.weight
  // llama.cpp's LLM_TYPE_70B (80 blocks with grouped-query attention): attn_v gets q5_k where it
  // would get q4_k.
  bool is_70b = false;
};

// The ggml type of the tensor in the file; nullopt: not quantized (keep it in float, f32).
std::optional<DType> gguf_tensor_type(GgufFileType file_type, const GgufTensorQuery& q);

// llama.cpp's use_more_bits(i, n): the first and last eighth of the layers and every third one
// between them.
bool gguf_use_more_bits(int64_t i, int64_t n);

}  // namespace lathe
