// Prefix-cache keys. A full KV block is keyed by a 64-bit hash chained over (the parent block's
// hash, the block's token ids, an extra key for anything else that changes the K/V, such as a LoRA
// adapter id). Two blocks with equal keys hold identical K/V, so requests can share them. The hash
// is only an index: a hit also compares the tokens, the extra key and the parent block
// (BlockPool::find_cached), so a hash collision can never produce a wrong hit.
#pragma once

#include <cstdint>
#include <span>

#include "engine/tokenizer/tokenizer.h"

namespace lathe {

using BlockHash = uint64_t;

// The "parent hash" of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x6c61746865ull;  // "lathe"

// hash(parent, extra_key, tokens). Deterministic across runs and platforms.
BlockHash hash_block(BlockHash parent, std::span<const TokenId> tokens, uint64_t extra_key);

}  // namespace lathe
