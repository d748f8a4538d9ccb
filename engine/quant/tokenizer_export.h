// Tokenizers across formats, for quantized outputs in a format other than the source's:
//   - GGUF tokenizer metadata from a Hugging Face folder, named as llama.cpp's
//   convert_hf_to_gguf.py
//     names it: a byte-level BPE tokenizer.json becomes tokenizer.ggml.model "gpt2" (tokens,
//     token_type, merges, the pre-tokenizer's llama.cpp name: "llama-bpe", "qwen2", "smollm",
//     "gpt-2"); a SentencePiece tokenizer.model becomes "llama" (tokens, scores, token_type).
//     Ids past the tokenizer up to the model's vocab_size become "[PAD<id>]" (type unused), as
//     llama.cpp pads them. Special ids and add_bos/add_eos follow tokenizer_config.json, then
//     config.json, then tokenizer.json's post-processor — the order Lathe's own HF loader uses.
//   - Hugging Face tokenizer files from GGUF tokenizer data: tokenizer.json ("gpt2") or
//     tokenizer.model ("llama"), and tokenizer_config.json with the chat template.
// Either way, Lathe's tokenizer on the written files gives the same ids as on the source (tests
// check it on real vocabularies).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/gguf_writer.h"
#include "engine/tokenizer/tokenizer_loader.h"

namespace lathe {

// tokenizer.ggml.* and tokenizer.chat_template for the model folder `folder` whose embedding has
// `vocab_size` rows. kUnsupported for tokenizers llama.cpp's names cannot describe (a pre-tokenizer
// Lathe does not know, a tokenizer.json that is neither byte-level BPE nor backed by
// tokenizer.model).
Result<GgufMetadata> gguf_tokenizer_metadata_from_hf(const std::string& folder, int64_t vocab_size);

// The tokenizer.* keys of a GGUF file (a model, or one of llama.cpp's vocab-only files), for
// another GGUF file of a model whose embedding has `vocab_size` rows. kInvalidArgument when the
// file has no tokenizer.ggml.tokens or another number of tokens than vocab_size.
Result<GgufMetadata> gguf_tokenizer_metadata_from_gguf(const std::string& path, int64_t vocab_size);

// The files of a Hugging Face tokenizer for GGUF tokenizer data: {file name, contents}.
// `chat_template` (may be empty) and `model_max_length` go into tokenizer_config.json.
Result<std::vector<std::pair<std::string, std::string>>> hf_tokenizer_files_from_gguf(
    const GgufTokenizerData& data, const std::string& chat_template, int64_t model_max_length);

}  // namespace lathe
