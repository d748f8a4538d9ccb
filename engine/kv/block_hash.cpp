#include "engine/kv/block_hash.h"

namespace lathe {
namespace {

// splitmix64 finalizer: a bijective 64-bit mix with good avalanche.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t combine(uint64_t h, uint64_t v) {
  return mix64(h ^ (v + 0x9e3779b97f4a7c15ull));
}

}  // namespace

BlockHash hash_block(BlockHash parent, std::span<const TokenId> tokens, uint64_t extra_key) {
  uint64_t h = combine(mix64(parent), extra_key);
  h = combine(h, tokens.size());
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    const uint64_t pair = static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) |
                          (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32);
    h = combine(h, pair);
  }
  if (i < tokens.size()) h = combine(h, static_cast<uint32_t>(tokens[i]));
  return h;
}

}  // namespace lathe
