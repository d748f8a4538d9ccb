// A model from a single GGUF file: config from metadata, weights memory-mapped in place, the
// tokenizer from tokenizer.ggml.*, the chat template from tokenizer.chat_template, and generation
// defaults. load_model() (model_loader.h) dispatches here; the pieces are public for tools and
// tests.
#pragma once

#include <string>

#include "engine/core/status.h"
#include "engine/model/gguf_file.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer_loader.h"

namespace lathe {

// tokenizer.ggml.* metadata. kNotFound when the file has no tokenizer.ggml.model; kCorruptFile when
// a key has the wrong type, scores / token_type do not have one entry per token, or a special id is
// outside the vocabulary.
Result<GgufTokenizerData> read_gguf_tokenizer_data(const GgufFile& gguf);

// EOS ids (tokenizer.ggml.eos_token_id, eot_token_id, eom_token_id) and sampling defaults
// (general.sampling.temp / top_p / top_k when present).
Result<GenerationDefaults> read_gguf_generation_defaults(const GgufFile& gguf);

// Loads `path` (a GGUF file). With LoadFormat::kDummy: config and metadata only, no weights.
Result<LoadedModel> load_gguf_model(const std::string& path, const LoadOptions& options);

}  // namespace lathe
