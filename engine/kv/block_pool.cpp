#include "engine/kv/block_pool.h"

#include <algorithm>
#include <cassert>

namespace lathe {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      ref_count_(num_blocks, 0),
      generation_(num_blocks, 0),
      cached_(num_blocks, 0),
      hash_(num_blocks, 0),
      parent_(num_blocks),
      extra_key_(num_blocks, 0),
      tokens_(static_cast<size_t>(num_blocks) * block_size, 0),
      lru_prev_(num_blocks, -1),
      lru_next_(num_blocks, -1) {
  // Hand out low ids first: push in descending order onto the LIFO.
  free_list_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

std::vector<int32_t> BlockPool::allocate(int32_t n) {
  assert(n >= 0 && n <= num_available());
  std::vector<int32_t> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    int32_t b;
    if (!free_list_.empty()) {
      b = free_list_.back();
      free_list_.pop_back();
    } else {
      b = lru_head_;
      lru_remove(b);
      uncache(b);
      ++num_evictions_;
    }
    ref_count_[b] = 1;
    ++generation_[b];
    out.push_back(b);
  }
  return out;
}

void BlockPool::acquire(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    if (ref_count_[b] == 0) {
      assert(cached_[b]);
      lru_remove(b);
    }
    ++ref_count_[b];
  }
}

void BlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    assert(ref_count_[b] > 0);
    if (--ref_count_[b] > 0) continue;
    if (cached_[b]) {
      lru_push_back(b);
    } else {
      free_list_.push_back(b);
    }
  }
}

void BlockPool::cache_block(int32_t block, const BlockKey& key) {
  assert(ref_count_[block] > 0 && !cached_[block]);
  assert(static_cast<int32_t>(key.tokens.size()) == block_size_);
  cached_[block] = 1;
  hash_[block] = key.hash;
  parent_[block] = key.parent;
  extra_key_[block] = key.extra_key;
  std::copy(key.tokens.begin(), key.tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(block) * block_size_);
  cache_.emplace(key.hash, block);
}

int32_t BlockPool::find_cached(const BlockKey& key) const {
  if (static_cast<int32_t>(key.tokens.size()) != block_size_) return -1;
  auto [it, end] = cache_.equal_range(key.hash);
  for (; it != end; ++it) {
    const int32_t b = it->second;
    if (parent_[b] != key.parent || extra_key_[b] != key.extra_key) continue;
    const TokenId* stored = tokens_.data() + static_cast<ptrdiff_t>(b) * block_size_;
    if (std::equal(key.tokens.begin(), key.tokens.end(), stored)) return b;
  }
  return -1;
}

void BlockPool::reset_prefix_cache() {
  while (lru_head_ >= 0) {
    const int32_t b = lru_head_;
    lru_remove(b);
    uncache(b);
    free_list_.push_back(b);
  }
  for (int32_t b = 0; b < num_blocks_; ++b)
    if (cached_[b]) uncache(b);
}

void BlockPool::uncache(int32_t block) {
  if (!cached_[block]) return;
  auto [it, end] = cache_.equal_range(hash_[block]);
  for (; it != end; ++it) {
    if (it->second == block) {
      cache_.erase(it);
      break;
    }
  }
  cached_[block] = 0;
  parent_[block] = BlockRef{};
}

void BlockPool::lru_push_back(int32_t block) {
  lru_prev_[block] = lru_tail_;
  lru_next_[block] = -1;
  if (lru_tail_ >= 0) {
    lru_next_[lru_tail_] = block;
  } else {
    lru_head_ = block;
  }
  lru_tail_ = block;
  ++lru_size_;
}

void BlockPool::lru_remove(int32_t block) {
  const int32_t p = lru_prev_[block], n = lru_next_[block];
  if (p >= 0)
    lru_next_[p] = n;
  else
    lru_head_ = n;
  if (n >= 0)
    lru_prev_[n] = p;
  else
    lru_tail_ = p;
  lru_prev_[block] = lru_next_[block] = -1;
  --lru_size_;
}

}  // namespace lathe
