// How a checkpoint says it is quantized, as the loader found it, and the online quantization a
// user asks for at load (vLLM's --quantization). The weight scheme handlers (weight_scheme.h) parse
// the method's own fields; this file only finds the config and names the method.
//
// Where the config comes from, first found wins:
//   config.json "quantization_config"   (transformers, vLLM, llm-compressor, GPTQModel, AutoAWQ)
//   quantize_config.json                (AutoGPTQ / GPTQModel; quant_method "gptq" when absent)
//   quant_config.json                   (AutoAWQ: w_bit, q_group_size, zero_point, version)
#pragma once

#include <string>
#include <string_view>

#include "engine/core/status.h"

namespace lathe {

struct CheckpointQuant {
  std::string method;       // "gptq", "awq", "compressed-tensors", "fp8"; empty: not quantized
  std::string config_json;  // the quantization config object, as JSON text
  std::string source;       // the file it was read from (for errors)

  bool quantized() const { return !method.empty(); }
};

// "gptq, awq, compressed-tensors, fp8"
std::string supported_quant_methods();

// Reads the folder's quantization config (see the file comment). kUnsupported for a quant_method
// Lathe does not read, naming the method and the supported ones; kCorruptFile for malformed JSON.
// An empty CheckpointQuant when the checkpoint is not quantized.
Result<CheckpointQuant> read_checkpoint_quant(const std::string& folder);

// Quantization applied while the weights are bound (round-to-nearest, engine/quant's primitives),
// like vLLM's `--quantization` for a 16-bit checkpoint:
//   kFp8   FP8 E4M3 weights, one scale per tensor (vLLM's online fp8)
//   kInt8  int8 weights, one symmetric scale per output channel (W8A16)
//   kInt4  int4 weights, symmetric, one f16 scale per 128 inputs (W4A16 g128; per channel when
//          128 does not divide the inputs)
// The embedding and the LM head stay as stored, as in vLLM.
enum class OnlineQuant : uint8_t { kNone, kFp8, kInt8, kInt4 };
const char* online_quant_name(OnlineQuant q);  // "none", "fp8", "int8", "int4"
bool parse_online_quant(std::string_view s, OnlineQuant* out);

}  // namespace lathe
