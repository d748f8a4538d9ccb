// Builds a Tokenizer from model files. The model loader calls these; they do not read weights.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

// Tokenizer data stored in GGUF metadata (tokenizer.ggml.*), extracted by the GGUF reader.
struct GgufTokenizerData {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // tokenizer.ggml.pre: "llama-bpe", "qwen2", "smollm", "default", ...
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (SPM; may be empty for BPE)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (1 normal, 2 unknown, 3 control, 4
                                     // user-defined, 5 unused, 6 byte)
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("a b"), BPE only
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t add_bos = -1;  // -1: key absent (use the model type's default)
  int32_t add_eos = -1;
  int32_t add_space_prefix = -1;  // SPM dummy prefix
};

Result<std::shared_ptr<const Tokenizer>> load_gguf_tokenizer(const GgufTokenizerData& data);

struct SpmModelSpec;  // spm_model_proto.h

// The SentencePiece model a GGUF "llama" vocabulary stands for (pieces, scores, types, special
// pieces, llama.cpp's normalization), as load_gguf_tokenizer() builds it; also what a
// tokenizer.model written from the GGUF holds. kCorruptFile when scores or types do not fit.
Result<SpmModelSpec> spm_model_spec_from_gguf(const GgufTokenizerData& data);

struct HfSpecialTokenSettings;  // hf_tokenizer_json.h

// The special-token settings of a Hugging Face folder: special_tokens_map.json, then
// tokenizer_config.json (later files win). Absent files are skipped.
Result<HfSpecialTokenSettings> read_hf_special_token_settings(const std::string& folder);

// Hugging Face folder: tokenizer.json (byte-level BPE or, when only it exists, tokenizer.model for
// SentencePiece), with tokenizer_config.json for add_bos_token / add_eos_token and special tokens.
// Errors name the folder and the missing file: "<dir>: no tokenizer.json or tokenizer.model".
Result<std::shared_ptr<const Tokenizer>> load_hf_tokenizer(const std::string& folder);

}  // namespace lathe
