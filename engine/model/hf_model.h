// A model from a Hugging Face folder: config.json, *.safetensors (single, sharded through
// model.safetensors.index.json, or several files without an index), tokenizer files
// (tokenizer.json or tokenizer.model, with tokenizer_config.json), the chat template and
// generation_config.json. load_model() (model_loader.h) dispatches here; the pieces are public for
// tools and tests.
#pragma once

#include <string>

#include "engine/core/status.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"

namespace lathe {

// True when the folder has tokenizer.json or tokenizer.model.
bool hf_folder_has_tokenizer(const std::string& folder);

// The folder's chat template: chat_template.jinja when present, else tokenizer_config.json's
// "chat_template" (a string, or a list of {"name", "template"} from which "default" is taken).
// Empty when the folder has none. Malformed JSON is kCorruptFile naming the file.
Result<std::string> read_hf_chat_template(const std::string& folder);

// EOS ids and sampling defaults from generation_config.json, then config.json's eos_token_id
// (each an int or a list of ints); ids are deduplicated, in that order.
Result<GenerationDefaults> read_hf_generation_defaults(const std::string& folder);

// Loads the folder. With LoadFormat::kDummy only config.json is needed (the tokenizer is loaded
// when the folder has one and options.load_tokenizer is set).
Result<LoadedModel> load_hf_model(const std::string& folder, const LoadOptions& options);

}  // namespace lathe
