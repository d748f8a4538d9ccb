// A quantized GGUF file: every tensor in the type llama.cpp's mix gives it for the file type
// (gguf_type_mix.h; norms, biases and other 1-D tensors in f32), quantized with the reference block
// quantizers (ggml_quantize.h); Llama-family Q/K rows permuted for adjacent-pair RoPE as
// llama.cpp's converter does; tensors in llama.cpp's order (globals, then block by block, by name).
// Metadata: a GGUF source's, copied whole (split keys dropped); for a Hugging Face source, the
// architecture keys, tokenizer and chat template as convert_hf_to_gguf.py names them
// (config_export.h, tokenizer_export.h), and a rope_freqs tensor for Llama 3 rope scaling. Both
// get general.file_type and general.quantization_version = 2 as llama-quantize sets them.
#pragma once

#include <memory>

#include "engine/quant/quant_output.h"
#include "engine/quant/quant_scheme.h"
#include "engine/quant/quant_source.h"

namespace lathe {

Result<std::unique_ptr<QuantOutputWriter>> make_gguf_quant_writer(const QuantSource& source,
                                                                  const QuantScheme& scheme);

}  // namespace lathe
