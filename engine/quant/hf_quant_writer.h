// A quantized Hugging Face folder: the linear layers' weights (attention q/k/v/o, MLP gate/up/down)
// quantized and packed in the GPTQ, AWQ or compressed-tensors layout; the embedding, the LM head
// (the "ignore" list), norms and biases kept in 16 bits (the source's f16, else bf16); config.json
// with its quantization_config (plus quantize_config.json / quant_config.json where GPTQ / AWQ
// tools expect them); the tokenizer, chat template and generation_config files copied from an HF
// source, or written from a GGUF source's metadata (tokenizer_export.h, config_export.h).
#pragma once

#include <memory>

#include "engine/quant/quant_output.h"
#include "engine/quant/quant_scheme.h"
#include "engine/quant/quant_source.h"

namespace lathe {

// Plans the folder. kInvalidArgument when a linear's shape does not fit the scheme, naming the
// tensor (a group size that does not divide its inputs, GPTQ/AWQ packing constraints).
Result<std::unique_ptr<QuantOutputWriter>> make_hf_quant_writer(const QuantSource& source,
                                                                const QuantScheme& scheme,
                                                                int64_t max_shard_bytes);

// The 16-bit type an HF output of this source stores unquantized tensors in: f16 for an f16
// source, else bf16.
DType hf_output_dtype(const QuantSource& source);

// True for the canonical names of the linear layers HF schemes quantize.
bool is_quantized_linear(const std::string& canonical);

}  // namespace lathe
