// SentencePiece's ModelProto (sentencepiece_model.proto) written and read by hand in the protobuf
// wire format, so Lathe needs neither protoc nor libprotobuf. Writing turns a GGUF "llama"
// vocabulary into a model libsentencepiece loads; reading gets the few fields Lathe itself needs
// from a tokenizer.model file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

// ModelProto.SentencePiece.Type; the numbers equal GGUF's tokenizer.ggml.token_type values.
enum class SpmPieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct SpmPiece {
  std::string piece;
  float score = 0.f;
  SpmPieceType type = SpmPieceType::kNormal;
};

struct SpmModelSpec {
  std::vector<SpmPiece> pieces;
  // TrainerSpec
  int32_t model_type = 1;  // 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  std::string unk_piece = "<unk>";
  std::string bos_piece = "<s>";
  std::string eos_piece = "</s>";
  std::string pad_piece = "<pad>";
  // NormalizerSpec
  std::string normalizer_name;           // "identity" = no character mapping
  std::string precompiled_charsmap;      // kept as is when read
  bool add_dummy_prefix = true;          // prepend "▁" to the text
  bool remove_extra_whitespaces = true;  // collapse runs of spaces, trim
  bool escape_whitespaces = true;        // spaces become "▁"
};

// Serialized ModelProto (pieces, trainer_spec, normalizer_spec).
std::string serialize_spm_model(const SpmModelSpec& spec);

// Parses a serialized ModelProto. Unknown fields are skipped; a malformed message is an error
// (kCorruptFile, with the byte offset).
Result<SpmModelSpec> parse_spm_model(std::string_view serialized);

}  // namespace lathe
