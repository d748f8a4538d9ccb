#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <deque>
#include <queue>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/unicode.h"

namespace lathe {

Result<std::shared_ptr<const BpeTokenizer>> BpeTokenizer::create(BpeTokenizerConfig config) {
  const std::string& src = config.source.empty() ? std::string("BPE tokenizer") : config.source;
  if (config.vocab.empty()) return corrupt_file(src + ": the vocabulary is empty");

  std::shared_ptr<BpeTokenizer> t(new BpeTokenizer());
  int64_t size = static_cast<int64_t>(config.vocab.size());
  for (const AddedToken& a : config.added_tokens) {
    if (a.id < 0) {
      return corrupt_file(src + ": added token '" + a.content + "' has a negative id " +
                          std::to_string(a.id));
    }
    size = std::max<int64_t>(size, int64_t{a.id} + 1);
  }
  if (size > kMaxTokenizerTokens)
    return corrupt_file(src + ": token id " + std::to_string(size - 1) +
                        " is past the largest vocabulary Lathe reads (" +
                        std::to_string(kMaxTokenizerTokens) + " tokens)");
  if (static_cast<int64_t>(config.merges.size()) > kMaxTokenizerMerges)
    return corrupt_file(src + ": " + std::to_string(config.merges.size()) +
                        " merges, more than Lathe reads (" + std::to_string(kMaxTokenizerMerges) +
                        ")");

  t->token_bytes_.resize(static_cast<size_t>(size));
  t->special_.assign(static_cast<size_t>(size), 0);
  t->vocab_.reserve(config.vocab.size());
  for (size_t id = 0; id < config.vocab.size(); ++id) {
    const std::string& text = config.vocab[id];
    if (text.empty()) continue;
    t->vocab_.emplace(text, static_cast<TokenId>(id));  // a duplicate keeps its first id
    t->token_bytes_[id] = byte_level::decode(text);
  }
  for (int b = 0; b < 256; ++b) {
    std::string text;
    unicode::append_utf8(text, byte_level::byte_to_codepoint(static_cast<uint8_t>(b)));
    const auto it = t->vocab_.find(text);
    t->byte_token_[b] = it == t->vocab_.end() ? -1 : it->second;
  }

  t->merges_.reserve(config.merges.size());
  for (size_t rank = 0; rank < config.merges.size(); ++rank) {
    const auto& [a, b] = config.merges[rank];
    const auto ia = t->vocab_.find(a);
    const auto ib = t->vocab_.find(b);
    const auto im = t->vocab_.find(a + b);
    if (ia == t->vocab_.end() || ib == t->vocab_.end() || im == t->vocab_.end()) {
      const std::string missing = ia == t->vocab_.end() ? a : ib == t->vocab_.end() ? b : a + b;
      return corrupt_file(src + ": merge " + std::to_string(rank) + " ('" + a + "' '" + b +
                          "') uses '" + missing + "', which is not in the vocabulary");
    }
    // A repeated pair keeps its first (lowest) rank, as Hugging Face tokenizers does.
    t->merges_.emplace(pair_key(ia->second, ib->second),
                       MergeInfo{static_cast<int32_t>(rank), im->second});
  }

  std::vector<AddedToken> raw, normalized;
  for (AddedToken& a : config.added_tokens) {
    if (a.content.empty()) continue;
    t->token_bytes_[static_cast<size_t>(a.id)] = a.content;
    if (a.special) t->special_[static_cast<size_t>(a.id)] = 1;
    t->added_by_content_.emplace(a.content, a.id);
    if (a.normalized && config.normalization == TextNormalization::kNfc) {
      AddedToken n = a;
      n.content = unicode::nfc(a.content);
      normalized.push_back(std::move(n));
    } else if (a.normalized) {
      normalized.push_back(a);
    } else {
      raw.push_back(a);
    }
  }
  t->raw_matcher_ = AddedTokenMatcher(std::move(raw));
  t->normalized_matcher_ = AddedTokenMatcher(std::move(normalized));

  for (const TokenId id : {config.bos_id, config.eos_id}) {
    if (id < -1 || id >= size) {
      return corrupt_file(src + ": special token id " + std::to_string(id) +
                          " is outside the vocabulary (size " + std::to_string(size) + ")");
    }
  }
  if (config.add_bos && config.bos_id < 0) {
    return corrupt_file(src + ": the tokenizer adds a BOS token but names none");
  }
  if (config.add_eos && config.eos_id < 0) {
    return corrupt_file(src + ": the tokenizer adds an EOS token but names none");
  }
  t->bos_id_ = config.bos_id;
  t->eos_id_ = config.eos_id;
  t->add_bos_ = config.add_bos;
  t->add_eos_ = config.add_eos;
  t->kind_ = "bpe";
  t->pre_tokenizer_ = std::move(config.pre_tokenizer);
  t->normalization_ = config.normalization;
  t->ignore_merges_ = config.ignore_merges;
  return std::shared_ptr<const BpeTokenizer>(std::move(t));
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_special_tokens && add_bos_) out.push_back(bos_id_);
  std::vector<TextSegment> segments;
  raw_matcher_.split(text, options.parse_special, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id >= 0) {
      out.push_back(seg.token_id);
      continue;
    }
    if (normalization_ == TextNormalization::kNfc) {
      const std::string normalized = unicode::nfc(seg.text);
      std::vector<TextSegment> inner;
      normalized_matcher_.split(normalized, options.parse_special, inner);
      for (const TextSegment& s : inner) {
        if (s.token_id >= 0) {
          out.push_back(s.token_id);
        } else {
          encode_plain(s.text, out);
        }
      }
    } else if (!normalized_matcher_.empty()) {
      std::vector<TextSegment> inner;
      normalized_matcher_.split(seg.text, options.parse_special, inner);
      for (const TextSegment& s : inner) {
        if (s.token_id >= 0) {
          out.push_back(s.token_id);
        } else {
          encode_plain(s.text, out);
        }
      }
    } else {
      encode_plain(seg.text, out);
    }
  }
  if (options.add_special_tokens && add_eos_) out.push_back(eos_id_);
  return out;
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pre_tokenizer_.split(text, pieces, storage);
  for (std::string_view piece : pieces) encode_piece(piece, out);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.size() == 1) {
    const TokenId id = byte_token_[static_cast<unsigned char>(piece[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  const std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  merge_piece(piece, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

void BpeTokenizer::merge_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    const auto it = vocab_.find(byte_level::encode(piece));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols form a doubly linked list over the piece; merging absorbs the right symbol.
  struct Symbol {
    TokenId id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (const char ch : piece) {
    const TokenId id = byte_token_[static_cast<unsigned char>(ch)];
    if (id < 0) continue;  // a byte the vocabulary cannot spell is dropped (no unk token)
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1});
    if (n > 0) symbols[n - 1].next = n;
  }
  // Candidate merges, lowest rank first, then leftmost. Entries go stale when a neighbour
  // changes; they are recognised by comparing the ids they were made for.
  struct Candidate {
    int32_t rank;
    int32_t left;
    TokenId left_id;
    TokenId right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, left, symbols[left].id, symbols[right].id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  std::vector<uint8_t> dead(symbols.size(), 0);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (dead[c.left] || left.id != c.left_id || left.next < 0) continue;
    const int32_t right_index = left.next;
    const Symbol& right = symbols[right_index];
    if (right.id != c.right_id) continue;
    left.id = merges_.at(pair_key(c.left_id, c.right_id)).merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    dead[right_index] = 1;
    push_pair(left.prev);
    push_pair(c.left);
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next)
    out.push_back(symbols[i].id);
}

std::string BpeTokenizer::token_bytes(TokenId id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return token_bytes_[static_cast<size_t>(id)];
}

std::string BpeTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string bytes;
  for (const TokenId id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special && special_[static_cast<size_t>(id)]) continue;
    bytes += token_bytes_[static_cast<size_t>(id)];
  }
  return unicode::sanitize_utf8(bytes);
}

bool BpeTokenizer::is_special(TokenId id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)] != 0;
}

TokenId BpeTokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = added_by_content_.find(key); it != added_by_content_.end()) return it->second;
  if (const auto it = vocab_.find(key); it != vocab_.end()) return it->second;
  if (const auto it = vocab_.find(byte_level::encode(token)); it != vocab_.end()) return it->second;
  return -1;
}

}  // namespace lathe
