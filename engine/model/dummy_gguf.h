// Random weights in GGUF block types (`--load-format dummy --quantization q4_k_m`): the speed and
// memory of a GGUF file at a real model's shape without the file (an 8B GGUF cannot travel to the
// GPU machine). The CUDA backend keeps each layer projection and the LM head in the block type the
// file would have, laid out as a GGUF file's tensors are uploaded (blocks along k, rows one after
// the other, engine/backend/cuda/dummy_quant.h), so the same kernels run as on the file.
//
// Values of --quantization for dummy loads (GGUF file types, llama.cpp's names):
//   q4_k_m  llama.cpp's Q4_K_M mix (engine/quant/gguf_type_mix.h): q4_k, with q6_k for attn_v and
//           ffn_down in the use_more_bits layers and for the LM head
//   q5_k_m  the same with q5_k
//   q4_0, q8_0, q6_k  every projection in that type; the LM head q6_k (q8_0 for q8_0)
//   q4_k    every layer projection q4_k (no q6_k layers), the LM head q6_k: the q4_k kernel alone
//   q4_1, q5_0, q5_1, q2_k, q3_k  every layer projection in that type, the LM head q6_k (block types
//           no Lathe-written file type uses: each one's kernel alone, as q4_k)
// The embedding stays 16-bit (the CUDA backend dequantizes a file's at upload too); a tied model
// reads its 16-bit embedding as the LM head, as it does for a tied GGUF file.
//
// Each block: random quants, constant scales (gguf_dummy_block): every sub-block scale 1 (mins 1),
// the f16 d (and dmin / m) set so that the weights have std ~0.02, as the 16-bit dummy's, and mean
// within half a code step of 0 (q4_0: -d/2). Speed and memory only: the values are not the CPU's
// dummy weights.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/checkpoint_quant.h"
#include "engine/model/model_config.h"
#include "engine/quant/gguf_type_mix.h"

namespace lathe {

struct DummyGguf {
  std::string name;  // the --quantization value ("q4_k_m"); empty: not a GGUF dummy
  GgufFileType file_type = GgufFileType::kQ4_K_M;  // whose rules type the LM head (and layers)
  bool uniform = false;  // "q4_k": every layer projection in one type (`base`)
  DType base = DType::kQ4_K;  // uniform: the layer projections' type

  bool active() const { return !name.empty(); }
};

// "q4_k_m, q4_k, q4_0, q8_0, q5_k_m, q6_k, q4_1, q5_0, q5_1, q2_k, q3_k"
std::string dummy_gguf_names();
// One of dummy_gguf_names() (lower case); nullopt otherwise.
std::optional<DummyGguf> parse_dummy_gguf(std::string_view s);

// Reads a --quantization value: fp8, int8, int4 (quantization of a 16-bit checkpoint at load,
// `online`), or one of dummy_gguf_names() (`gguf`), which only random weights take (`dummy`:
// --load-format dummy). kInvalidArgument naming the value and what is accepted otherwise.
Status parse_quantization_option(std::string_view value, bool dummy, OnlineQuant* online,
                                 DummyGguf* gguf);

// The block type of a dummy tensor. `tensor`: the GGUF name without "blk.N." and ".weight"
// ("attn_q", "attn_v", "ffn_down", ...) or "output" (the untied LM head); `layer`: its block index
// (-1 for output); `row_length`: its k. kUnsupported when no block type of the file type fits k
// (llama.cpp's last fallback, f16, is not a dummy format).
Result<DType> dummy_gguf_type(const DummyGguf& g, const ModelConfig& c, std::string_view tensor,
                              int64_t layer, int64_t row_length);

// The constant bytes of every block of a dummy tensor: block bytes [offset, offset + len) are
// `bytes` (the f16 d / dmin / m and the sub-block scales); the rest are random quants.
struct GgufDummyBlock {
  int32_t block_bytes = 0;
  int32_t offset = 0;
  int32_t len = 0;
  std::array<uint8_t, 20> bytes{};
  struct Run {
    int32_t offset = 0, len = 0;
    std::array<uint8_t, 4> bytes{};
  } more;  // len 0: none
};
// For q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k and q6_k (the types dummy_gguf_type
// gives); kUnsupported for others. Q2_K's constant bytes are two runs: `more` holds the second.
Result<GgufDummyBlock> gguf_dummy_block(DType t);

}  // namespace lathe
