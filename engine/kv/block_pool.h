// The pool of KV-cache blocks: reference counts, a free list, and the prefix cache.
//
// Every block is in exactly one of three states:
//   used         ref_count > 0 (held by one or more requests' block tables)
//   cached-free  ref_count == 0, holds a cached block's K/V; kept in an LRU list and reused only
//                when no plain free block is left (least recently released first)
//   free         ref_count == 0, no cached content
// so num_used() + num_cached_free() + num_free() == num_blocks() at all times.
//
// Single-threaded: the engine core's thread owns the pool. No backend code: block ids index the
// backend's KV tensors, which the pool never touches.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/block_hash.h"

namespace lathe {

// A block as it is now. A block's generation grows each time it is handed out by allocate(), so a
// BlockRef taken earlier no longer matches once the block has been reused for other tokens.
struct BlockRef {
  int32_t block = -1;  // -1: none (the parent of a sequence's first block)
  uint32_t generation = 0;
  bool operator==(const BlockRef&) const = default;
};

// What a cached block holds. Two blocks with equal keys hold identical K/V.
struct BlockKey {
  BlockHash hash = 0;
  BlockRef parent;                  // the cached block holding the previous block_size tokens
  uint64_t extra_key = 0;           // e.g. a LoRA adapter id; 0 = none
  std::span<const TokenId> tokens;  // exactly block_size() tokens
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_cached_free() const { return lru_size_; }
  int32_t num_used() const { return num_blocks_ - num_free() - num_cached_free(); }
  // Blocks allocate() can hand out: free + cached-free.
  int32_t num_available() const { return num_free() + num_cached_free(); }
  // Cached-free blocks evicted so far to make room.
  int64_t num_evictions() const { return num_evictions_; }

  // Hands out `n` blocks with ref_count 1 and no cached content: plain free blocks first, then
  // cached-free ones in LRU order (evicting their cache entries). Requires n <= num_available().
  std::vector<int32_t> allocate(int32_t n);

  // Adds one reference to each block (prefix-cache hits). Cached-free blocks leave the LRU.
  void acquire(std::span<const int32_t> blocks);

  // Drops one reference from each block, in the order given. A block whose count reaches 0 becomes
  // cached-free (appended to the LRU, so earlier-released blocks are evicted first) when it has
  // cached content, else free.
  void release(std::span<const int32_t> blocks);

  // Publishes a used, not yet cached block under `key` (its K/V are, or will be by the end of the
  // current step, the key's tokens). Requires key.tokens.size() == block_size().
  void cache_block(int32_t block, const BlockKey& key);

  // The cached block whose key equals `key` in every field (hash, parent, extra key and every
  // token), or -1. Never trusts the hash alone.
  int32_t find_cached(const BlockKey& key) const;

  // Drops every block's cached content: cached-free blocks become free; used blocks stay used but
  // can no longer be found. For a runner failure (K/V contents unknown) and tests.
  void reset_prefix_cache();

  int32_t ref_count(int32_t block) const { return ref_count_[block]; }
  BlockRef ref(int32_t block) const { return {block, generation_[block]}; }

 private:
  void lru_push_back(int32_t block);
  void lru_remove(int32_t block);
  void uncache(int32_t block);

  int32_t num_blocks_;
  int32_t block_size_;

  std::vector<int32_t> ref_count_;
  std::vector<uint32_t> generation_;
  std::vector<char> cached_;
  std::vector<BlockHash> hash_;
  std::vector<BlockRef> parent_;
  std::vector<uint64_t> extra_key_;
  std::vector<TokenId> tokens_;  // [num_blocks, block_size]: contents of cached blocks

  std::vector<int32_t> free_list_;  // LIFO of free blocks
  // Intrusive doubly linked LRU of cached-free blocks: head = least recently released.
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = -1, lru_tail_ = -1, lru_size_ = 0;

  std::unordered_multimap<BlockHash, int32_t> cache_;  // hash -> cached blocks (used or free)
  int64_t num_evictions_ = 0;
};

}  // namespace lathe
