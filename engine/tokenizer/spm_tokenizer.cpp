#include "engine/tokenizer/spm_tokenizer.h"

#include <sentencepiece_processor.h>

#include <unordered_set>

#include "engine/tokenizer/spm_model_proto.h"
#include "engine/tokenizer/unicode.h"

namespace lathe {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"

std::string replace_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t pos = 0;
  while (pos < piece.size()) {
    if (piece.compare(pos, kSpace.size(), kSpace) == 0) {
      out.push_back(' ');
      pos += kSpace.size();
    } else {
      out.push_back(piece[pos++]);
    }
  }
  return out;
}

// "<0x0A>" -> 0x0A; -1 when `piece` is not of that form.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    int digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else
      return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

SpmTokenizer::SpmTokenizer() = default;
SpmTokenizer::~SpmTokenizer() = default;

Result<std::shared_ptr<const SpmTokenizer>> SpmTokenizer::create(
    std::string serialized_model, const SpmTokenizerOptions& options) {
  const std::string src =
      options.source.empty() ? std::string("SentencePiece model") : options.source;
  // Parse first: sentencepiece's own errors for a file that is not a model are cryptic.
  Result<SpmModelSpec> spec = parse_spm_model(serialized_model);
  if (!spec) return spec.status().with_context(src);
  std::unordered_set<std::string_view> seen;
  bool has_unknown = false;
  for (size_t i = 0; i < spec->pieces.size(); ++i) {
    const SpmPiece& p = spec->pieces[i];
    if (p.piece.empty()) return corrupt_file(src + ": piece " + std::to_string(i) + " is empty");
    if (!seen.insert(p.piece).second) {
      return corrupt_file(src + ": piece " + std::to_string(i) + " '" + p.piece +
                          "' appears twice in the vocabulary");
    }
    has_unknown = has_unknown || p.type == SpmPieceType::kUnknown;
  }
  if (!has_unknown) {
    return corrupt_file(src +
                        ": the vocabulary has no unknown token, which SentencePiece requires");
  }

  std::shared_ptr<SpmTokenizer> t(new SpmTokenizer());
  t->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = t->sp_->LoadFromSerializedProto(serialized_model);
  if (!status.ok()) {
    return corrupt_file(src + ": sentencepiece cannot load the model: " + status.ToString());
  }
  const int n = t->sp_->GetPieceSize();
  if (n != static_cast<int>(spec->pieces.size())) {
    return internal_error(src + ": sentencepiece reports " + std::to_string(n) +
                          " pieces, the file has " + std::to_string(spec->pieces.size()));
  }
  t->token_bytes_.resize(static_cast<size_t>(n));
  t->special_.assign(static_cast<size_t>(n), 0);
  std::vector<AddedToken> specials;
  for (int id = 0; id < n; ++id) {
    const SpmPiece& p = spec->pieces[static_cast<size_t>(id)];
    t->piece_to_id_.emplace(p.piece, id);
    const int byte = p.type == SpmPieceType::kByte ? parse_byte_piece(p.piece) : -1;
    if (byte >= 0) {
      t->token_bytes_[id] = std::string(1, static_cast<char>(byte));
    } else if (p.type == SpmPieceType::kControl || p.type == SpmPieceType::kUnknown) {
      t->token_bytes_[id] = p.piece;
      t->special_[id] = 1;
      AddedToken a;
      a.content = p.piece;
      a.id = id;
      a.special = true;
      specials.push_back(std::move(a));
    } else {
      t->token_bytes_[id] = replace_spaces(p.piece);
    }
  }
  t->specials_ = AddedTokenMatcher(std::move(specials));
  t->add_dummy_prefix_ = spec->add_dummy_prefix;

  auto resolve = [&](TokenId id, const std::string& text, int model_default) -> TokenId {
    if (id >= 0) return id;
    if (!text.empty()) {
      const auto it = t->piece_to_id_.find(text);
      if (it != t->piece_to_id_.end()) return it->second;
    }
    return model_default;
  };
  const TokenId bos = resolve(options.bos_id, options.bos_token, t->sp_->bos_id());
  const TokenId eos = resolve(options.eos_id, options.eos_token, t->sp_->eos_id());
  if (bos >= n || eos >= n) {
    return corrupt_file(src + ": BOS/EOS id " + std::to_string(bos >= n ? bos : eos) +
                        " is outside the vocabulary (size " + std::to_string(n) + ")");
  }
  if (options.add_bos && bos < 0) {
    return corrupt_file(src + ": the tokenizer adds a BOS token but the vocabulary has none");
  }
  if (options.add_eos && eos < 0) {
    return corrupt_file(src + ": the tokenizer adds an EOS token but the vocabulary has none");
  }
  t->bos_id_ = bos < 0 ? -1 : bos;
  t->eos_id_ = eos < 0 ? -1 : eos;
  t->add_bos_ = options.add_bos;
  t->add_eos_ = options.add_eos;
  t->kind_ = "spm";
  return std::shared_ptr<const SpmTokenizer>(std::move(t));
}

std::vector<TokenId> SpmTokenizer::encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::vector<TokenId> out;
  if (options.add_special_tokens && add_bos_) out.push_back(bos_id_);
  std::vector<TextSegment> segments;
  specials_.split(text, options.parse_special, segments);
  std::vector<int> ids;
  for (const TextSegment& seg : segments) {
    if (seg.token_id >= 0) {
      out.push_back(seg.token_id);
      continue;
    }
    ids.clear();
    const std::string valid = unicode::sanitize_utf8(seg.text);
    // Encode only fails on an unloaded model, which create() rules out.
    if (sp_->Encode(valid, &ids).ok()) out.insert(out.end(), ids.begin(), ids.end());
  }
  if (options.add_special_tokens && add_eos_) out.push_back(eos_id_);
  return out;
}

std::string SpmTokenizer::token_bytes(TokenId id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return token_bytes_[static_cast<size_t>(id)];
}

std::string SpmTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string bytes;
  bool at_boundary = true;  // start of the sequence, or just after a special token
  for (const TokenId id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    std::string_view piece = token_bytes_[static_cast<size_t>(id)];
    if (special_[static_cast<size_t>(id)]) {
      if (!skip_special) bytes.append(piece);
      at_boundary = true;
      continue;
    }
    if (at_boundary && add_dummy_prefix_ && !piece.empty() && piece.front() == ' ')
      piece.remove_prefix(1);
    at_boundary = false;
    bytes.append(piece);
  }
  return unicode::sanitize_utf8(bytes);
}

bool SpmTokenizer::is_special(TokenId id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)] != 0;
}

TokenId SpmTokenizer::token_to_id(std::string_view token) const {
  const auto it = piece_to_id_.find(std::string(token));
  return it == piece_to_id_.end() ? -1 : it->second;
}

}  // namespace lathe
