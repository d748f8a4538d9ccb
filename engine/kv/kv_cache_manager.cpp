#include "engine/kv/kv_cache_manager.h"

#include <algorithm>

namespace lathe {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks, config.block_size) {}

PrefixHit KvCacheManager::find_prefix_hit(std::span<const TokenId> tokens,
                                          uint64_t extra_key) const {
  PrefixHit hit;
  if (!config_.enable_prefix_caching || tokens.empty()) return hit;
  const int32_t bs = config_.block_size;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(bs);
  BlockHash parent_hash = kRootBlockHash;
  BlockRef parent;
  for (size_t i = 0; i < max_blocks; ++i) {
    BlockKey key;
    key.tokens = tokens.subspan(i * bs, bs);
    key.extra_key = extra_key;
    key.parent = parent;
    key.hash = hash_block(parent_hash, key.tokens, extra_key);
    const int32_t b = pool_.find_cached(key);
    if (b < 0) break;
    hit.blocks.push_back(b);
    hit.hashes.push_back(key.hash);
    parent_hash = key.hash;
    parent = pool_.ref(b);
  }
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size()) * bs;
  return hit;
}

bool KvCacheManager::can_allocate(RequestId id, int32_t num_tokens, const PrefixHit& hit) const {
  auto it = requests_.find(id);
  const bool fresh = it == requests_.end() || it->second.blocks.empty();
  const int32_t have = fresh ? static_cast<int32_t>(hit.blocks.size())
                             : static_cast<int32_t>(it->second.blocks.size());
  const int32_t need = std::max(0, blocks_for_tokens(num_tokens) - have);
  int32_t revived = 0;  // hit blocks that leave the cached-free LRU when acquired
  if (fresh)
    for (int32_t b : hit.blocks) revived += pool_.ref_count(b) == 0 ? 1 : 0;
  return need + revived <= pool_.num_available();
}

bool KvCacheManager::allocate(RequestId id, int32_t num_tokens, const PrefixHit& hit) {
  if (!can_allocate(id, num_tokens, hit)) return false;
  RequestBlocks& r = requests_[id];
  if (r.blocks.empty() && !hit.blocks.empty()) {
    pool_.acquire(hit.blocks);
    r.blocks = hit.blocks;
    r.hashes = hit.hashes;
    r.canonical.clear();
    for (int32_t b : hit.blocks) r.canonical.push_back(pool_.ref(b));
  }
  const int32_t need = blocks_for_tokens(num_tokens) - static_cast<int32_t>(r.blocks.size());
  if (need > 0) {
    std::vector<int32_t> fresh = pool_.allocate(need);
    r.blocks.insert(r.blocks.end(), fresh.begin(), fresh.end());
  }
  return true;
}

void KvCacheManager::cache_blocks(RequestId id, std::span<const TokenId> tokens, int32_t num_tokens,
                                  uint64_t extra_key) {
  if (!config_.enable_prefix_caching) return;
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestBlocks& r = it->second;
  const int32_t bs = config_.block_size;
  const size_t num_full =
      std::min<size_t>({static_cast<size_t>(num_tokens / bs), tokens.size() / bs, r.blocks.size()});
  for (size_t i = r.hashes.size(); i < num_full; ++i) {
    BlockKey key;
    key.tokens = tokens.subspan(i * bs, bs);
    key.extra_key = extra_key;
    key.parent = i == 0 ? BlockRef{} : r.canonical[i - 1];
    key.hash = hash_block(i == 0 ? kRootBlockHash : r.hashes[i - 1], key.tokens, extra_key);
    // Another request may already have published identical content (both computed it at once):
    // keep that one as the canonical block so the chain stays findable; ours stays private.
    const int32_t existing = pool_.find_cached(key);
    if (existing >= 0) {
      r.canonical.push_back(pool_.ref(existing));
    } else {
      pool_.cache_block(r.blocks[i], key);
      r.canonical.push_back(pool_.ref(r.blocks[i]));
    }
    r.hashes.push_back(key.hash);
  }
}

void KvCacheManager::free(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::vector<int32_t> blocks = std::move(it->second.blocks);
  std::reverse(blocks.begin(), blocks.end());
  pool_.release(blocks);
  requests_.erase(it);
}

void KvCacheManager::truncate(RequestId id, int32_t num_tokens) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestBlocks& r = it->second;
  const size_t keep = static_cast<size_t>(blocks_for_tokens(std::max(0, num_tokens)));
  if (r.blocks.size() <= keep) return;
  if (r.hashes.size() > keep) {
    r.hashes.resize(keep);
    r.canonical.resize(keep);
  }
  for (size_t i = r.blocks.size(); i-- > keep;) pool_.release({&r.blocks[i], 1});
  r.blocks.resize(keep);
}

std::span<const int32_t> KvCacheManager::block_table(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  return it->second.blocks;
}

KvUsage KvCacheManager::usage() const {
  KvUsage u;
  u.total = pool_.num_blocks();
  u.used = pool_.num_used();
  u.cached_free = pool_.num_cached_free();
  u.free = pool_.num_free();
  return u;
}

}  // namespace lathe
