// Per-request block tables on top of the BlockPool, with a query-then-commit API (as nano-vllm's
// can_allocate / allocate): the scheduler asks find_prefix_hit() and can_allocate(), which change
// nothing, and commits with allocate(), which either succeeds completely or changes nothing.
//
// Token i of a request lives in block_table[i / block_size] at offset i % block_size. Full blocks
// are published to the prefix cache by cache_blocks() as soon as the step that writes their K/V is
// scheduled; another request can then share them (the backend writes all K/V of a step's layer
// before that layer's attention reads, see model_io.h). The caller passes only verified tokens
// (never speculative drafts), so a published block never holds a token that may be rejected.
//
// Single-threaded (the engine core's thread). No backend code.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/block_pool.h"

namespace lathe {

using RequestId = uint64_t;

struct KvCacheConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per block
  bool enable_prefix_caching = true;
};

// The result of a prefix-cache lookup: cached blocks holding the first num_tokens tokens. Valid
// until the pool changes (the next allocate / free).
struct PrefixHit {
  std::vector<int32_t> blocks;
  std::vector<BlockHash> hashes;  // per block
  int32_t num_tokens = 0;         // blocks.size() * block_size
};

// Block counts at one moment; used + cached_free + free == total.
struct KvUsage {
  int32_t total = 0;
  int32_t used = 0;
  int32_t cached_free = 0;
  int32_t free = 0;
  // Share of blocks held by requests, in [0, 1] (cached-free blocks count as free, as in vLLM).
  double usage() const { return total > 0 ? static_cast<double>(used) / total : 0.0; }
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  int32_t blocks_for_tokens(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + config_.block_size - 1) / config_.block_size);
  }

  // Query: the longest run of cached full blocks that is a prefix of `tokens`, at most
  // tokens.size() - 1 tokens so that at least one token is computed (its logits give the next
  // token). Empty when prefix caching is off.
  PrefixHit find_prefix_hit(std::span<const TokenId> tokens, uint64_t extra_key) const;

  // Query: could request `id` hold `num_tokens` tokens in total? `hit` is used only when the
  // request holds no blocks yet.
  bool can_allocate(RequestId id, int32_t num_tokens, const PrefixHit& hit = {}) const;

  // Commit: grows request `id`'s block table to hold `num_tokens` tokens, starting from `hit`'s
  // blocks (shared, ref-counted) when it holds none yet. Returns false and changes nothing when the
  // pool cannot supply the blocks.
  bool allocate(RequestId id, int32_t num_tokens, const PrefixHit& hit = {});

  // Publishes request `id`'s full blocks among its first `num_tokens` tokens to the prefix cache.
  // `tokens` are the request's tokens (at least num_tokens of them). No-op when caching is off.
  void cache_blocks(RequestId id, std::span<const TokenId> tokens, int32_t num_tokens,
                    uint64_t extra_key);

  // Releases the request's blocks (last block first, so a prefix outlives its tails in the LRU)
  // and forgets it. Unknown ids are ignored.
  void free(RequestId id);

  // Keeps the blocks that hold request `id`'s first `num_tokens` tokens and releases the ones
  // wholly past them, last block first (rejected draft tokens, speculative decoding). A released
  // block that was published stays cached-free; the request's chain of published blocks shortens
  // with it. Unknown ids are ignored.
  void truncate(RequestId id, int32_t num_tokens);

  std::span<const int32_t> block_table(RequestId id) const;
  bool has_request(RequestId id) const { return requests_.count(id) != 0; }
  int32_t num_requests() const { return static_cast<int32_t>(requests_.size()); }

  KvUsage usage() const;
  const BlockPool& pool() const { return pool_; }
  // Forgets every cached block (after a runner failure left K/V contents unknown).
  void reset_prefix_cache() { pool_.reset_prefix_cache(); }

 private:
  struct RequestBlocks {
    std::vector<int32_t> blocks;
    std::vector<BlockHash> hashes;    // per published full block, in order
    std::vector<BlockRef> canonical;  // per published full block: the cached block with its content
  };

  KvCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<RequestId, RequestBlocks> requests_;
};

}  // namespace lathe
