#include "engine/tokenizer/spm_model_proto.h"

#include <cstring>

namespace lathe {

namespace {

// Field numbers from sentencepiece_model.proto.
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr uint32_t kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kTrainerModelType = 3, kTrainerByteFallback = 35, kTrainerUnkId = 40,
                   kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43,
                   kTrainerUnkPiece = 45, kTrainerBosPiece = 46, kTrainerEosPiece = 47,
                   kTrainerPadPiece = 48;
constexpr uint32_t kNormName = 1, kNormCharsmap = 2, kNormAddDummyPrefix = 3,
                   kNormRemoveExtraWhitespaces = 4, kNormEscapeWhitespaces = 5;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class Writer {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void tag(uint32_t field, WireType type) { varint((uint64_t{field} << 3) | type); }
  // int32 fields are encoded as 64-bit two's complement varints (negative values take 10 bytes).
  void int_field(uint32_t field, int64_t v) {
    tag(field, kVarint);
    varint(static_cast<uint64_t>(v));
  }
  void bool_field(uint32_t field, bool v) { int_field(field, v ? 1 : 0); }
  void bytes_field(uint32_t field, std::string_view v) {
    tag(field, kLengthDelimited);
    varint(v.size());
    out_.append(v);
  }
  void float_field(uint32_t field, float v) {
    tag(field, kFixed32);
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view data, size_t base) : data_(data), base_(base) {}
  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const auto b = static_cast<unsigned char>(data_[pos_++]);
      *v |= uint64_t{b & 0x7Fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // Reads one field header and its payload. Length-delimited payloads go to `bytes`, varints to
  // `number`, fixed32 to `bits32`; fixed64 is skipped.
  bool field(uint32_t* number, WireType* type, uint64_t* value, std::string_view* bytes) {
    uint64_t key;
    if (!varint(&key)) return false;
    *number = static_cast<uint32_t>(key >> 3);
    *type = static_cast<WireType>(key & 7);
    switch (*type) {
      case kVarint:
        return varint(value);
      case kFixed64:
        if (data_.size() - pos_ < 8) return false;
        pos_ += 8;
        return true;
      case kLengthDelimited: {
        uint64_t len;
        if (!varint(&len) || len > data_.size() - pos_) return false;
        *bytes = data_.substr(pos_, len);
        pos_ += len;
        return true;
      }
      case kFixed32: {
        if (data_.size() - pos_ < 4) return false;
        uint32_t bits = 0;
        for (int i = 0; i < 4; ++i)
          bits |= uint32_t{static_cast<unsigned char>(data_[pos_ + i])} << (8 * i);
        pos_ += 4;
        *value = bits;
        return true;
      }
    }
    return false;  // groups (3, 4) and reserved wire types are not used by this proto
  }

 private:
  std::string_view data_;
  size_t base_;
  size_t pos_ = 0;
};

Status malformed(size_t offset, const char* what) {
  return corrupt_file("not a SentencePiece model: malformed " + std::string(what) + " at byte " +
                      std::to_string(offset));
}

}  // namespace

std::string serialize_spm_model(const SpmModelSpec& spec) {
  Writer model;
  for (const SpmPiece& p : spec.pieces) {
    Writer piece;
    piece.bytes_field(kPiecePiece, p.piece);
    piece.float_field(kPieceScore, p.score);
    piece.int_field(kPieceType, static_cast<int32_t>(p.type));
    model.bytes_field(kModelPieces, piece.str());
  }
  int32_t unk = -1, bos = -1, eos = -1, pad = -1;
  for (size_t i = 0; i < spec.pieces.size(); ++i) {
    const SpmPiece& p = spec.pieces[i];
    const auto id = static_cast<int32_t>(i);
    if (p.type == SpmPieceType::kUnknown && unk < 0) unk = id;
    if (p.piece == spec.bos_piece && bos < 0) bos = id;
    if (p.piece == spec.eos_piece && eos < 0) eos = id;
    if (p.piece == spec.pad_piece && pad < 0) pad = id;
  }
  Writer trainer;
  trainer.int_field(kTrainerModelType, spec.model_type);
  trainer.bool_field(kTrainerByteFallback, spec.byte_fallback);
  trainer.int_field(kTrainerUnkId, unk);
  trainer.int_field(kTrainerBosId, bos);
  trainer.int_field(kTrainerEosId, eos);
  trainer.int_field(kTrainerPadId, pad);
  trainer.bytes_field(kTrainerUnkPiece, spec.unk_piece);
  trainer.bytes_field(kTrainerBosPiece, spec.bos_piece);
  trainer.bytes_field(kTrainerEosPiece, spec.eos_piece);
  trainer.bytes_field(kTrainerPadPiece, spec.pad_piece);
  model.bytes_field(kModelTrainerSpec, trainer.str());

  Writer norm;
  norm.bytes_field(kNormName, spec.normalizer_name);
  if (!spec.precompiled_charsmap.empty())
    norm.bytes_field(kNormCharsmap, spec.precompiled_charsmap);
  norm.bool_field(kNormAddDummyPrefix, spec.add_dummy_prefix);
  norm.bool_field(kNormRemoveExtraWhitespaces, spec.remove_extra_whitespaces);
  norm.bool_field(kNormEscapeWhitespaces, spec.escape_whitespaces);
  model.bytes_field(kModelNormalizerSpec, norm.str());
  return std::move(model.str());
}

Result<SpmModelSpec> parse_spm_model(std::string_view serialized) {
  if (serialized.empty()) return corrupt_file("not a SentencePiece model: the file is empty");
  SpmModelSpec spec;
  Reader model(serialized, 0);
  uint32_t number;
  WireType type;
  uint64_t value = 0;
  std::string_view bytes;
  while (!model.done()) {
    const size_t at = model.offset();
    if (!model.field(&number, &type, &value, &bytes)) return malformed(at, "field");
    if (number == kModelPieces && type == kLengthDelimited) {
      SpmPiece piece;
      Reader r(bytes, at);
      while (!r.done()) {
        const size_t pat = r.offset();
        if (!r.field(&number, &type, &value, &bytes)) return malformed(pat, "piece");
        if (number == kPiecePiece && type == kLengthDelimited) {
          piece.piece = std::string(bytes);
        } else if (number == kPieceScore && type == kFixed32) {
          const auto bits = static_cast<uint32_t>(value);
          std::memcpy(&piece.score, &bits, sizeof bits);
        } else if (number == kPieceType && type == kVarint) {
          if (value < 1 || value > 6) return malformed(pat, "piece type");
          piece.type = static_cast<SpmPieceType>(value);
        }
      }
      spec.pieces.push_back(std::move(piece));
    } else if (number == kModelTrainerSpec && type == kLengthDelimited) {
      Reader r(bytes, at);
      while (!r.done()) {
        const size_t tat = r.offset();
        if (!r.field(&number, &type, &value, &bytes)) return malformed(tat, "trainer_spec");
        if (type == kVarint && number == kTrainerModelType)
          spec.model_type = static_cast<int32_t>(value);
        if (type == kVarint && number == kTrainerByteFallback) spec.byte_fallback = value != 0;
        if (type == kLengthDelimited && number == kTrainerUnkPiece)
          spec.unk_piece = std::string(bytes);
        if (type == kLengthDelimited && number == kTrainerBosPiece)
          spec.bos_piece = std::string(bytes);
        if (type == kLengthDelimited && number == kTrainerEosPiece)
          spec.eos_piece = std::string(bytes);
        if (type == kLengthDelimited && number == kTrainerPadPiece)
          spec.pad_piece = std::string(bytes);
      }
    } else if (number == kModelNormalizerSpec && type == kLengthDelimited) {
      Reader r(bytes, at);
      while (!r.done()) {
        const size_t nat = r.offset();
        if (!r.field(&number, &type, &value, &bytes)) return malformed(nat, "normalizer_spec");
        if (type == kLengthDelimited && number == kNormName)
          spec.normalizer_name = std::string(bytes);
        if (type == kLengthDelimited && number == kNormCharsmap)
          spec.precompiled_charsmap = std::string(bytes);
        if (type == kVarint && number == kNormAddDummyPrefix) spec.add_dummy_prefix = value != 0;
        if (type == kVarint && number == kNormRemoveExtraWhitespaces)
          spec.remove_extra_whitespaces = value != 0;
        if (type == kVarint && number == kNormEscapeWhitespaces)
          spec.escape_whitespaces = value != 0;
      }
    }
  }
  if (spec.pieces.empty()) return corrupt_file("not a SentencePiece model: it has no pieces");
  return spec;
}

}  // namespace lathe
