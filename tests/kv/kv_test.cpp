// Block pool and KV-cache manager: reference counts, the free list, prefix-cache keys that never
// trust the hash alone, LRU eviction of cached-free blocks, query-then-commit allocation.
#include <QtTest>

#include <numeric>
#include <vector>

#include "engine/kv/block_hash.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_manager.h"
#include "test_support.h"

using namespace lathe;

namespace {

std::vector<TokenId> iota_tokens(int n, TokenId first = 100) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

void verify_accounting(const BlockPool& pool) {
  QCOMPARE(pool.num_used() + pool.num_cached_free() + pool.num_free(), pool.num_blocks());
}

BlockKey key_for(std::span<const TokenId> tokens, BlockRef parent = {}, uint64_t extra = 0,
                 BlockHash parent_hash = kRootBlockHash) {
  BlockKey k;
  k.tokens = tokens;
  k.parent = parent;
  k.extra_key = extra;
  k.hash = hash_block(parent_hash, tokens, extra);
  return k;
}

}  // namespace

class KvTest : public QObject {
  Q_OBJECT
 private slots:
  void hash_depends_on_parent_tokens_and_extra_key() {
    const auto a = iota_tokens(16), b = iota_tokens(16, 101);
    QCOMPARE(hash_block(kRootBlockHash, a, 0), hash_block(kRootBlockHash, a, 0));
    QVERIFY(hash_block(kRootBlockHash, a, 0) != hash_block(kRootBlockHash, b, 0));
    QVERIFY(hash_block(kRootBlockHash, a, 0) != hash_block(kRootBlockHash, a, 7));
    QVERIFY(hash_block(kRootBlockHash, a, 0) != hash_block(12345, a, 0));
  }

  void pool_hands_out_and_takes_back_blocks() {
    BlockPool pool(8, 4);
    verify_accounting(pool);
    QCOMPARE(pool.num_free(), 8);
    auto blocks = pool.allocate(5);
    QCOMPARE(int(blocks.size()), 5);
    QCOMPARE(pool.num_used(), 5);
    for (int32_t b : blocks) QCOMPARE(pool.ref_count(b), 1);
    pool.acquire(std::span<const int32_t>(blocks.data(), 2));
    QCOMPARE(pool.ref_count(blocks[0]), 2);
    pool.release(blocks);
    QCOMPARE(pool.num_used(), 2);  // the two shared blocks still have one holder
    verify_accounting(pool);
    pool.release(std::span<const int32_t>(blocks.data(), 2));
    QCOMPARE(pool.num_free(), 8);
    verify_accounting(pool);
  }

  void cached_blocks_survive_release_and_are_evicted_last_lru_first() {
    BlockPool pool(4, 2);
    auto blocks = pool.allocate(4);
    const std::vector<TokenId> t0{1, 2}, t1{3, 4}, t2{5, 6};
    pool.cache_block(blocks[0], key_for(t0));
    pool.cache_block(blocks[1], key_for(t1));
    pool.cache_block(blocks[2], key_for(t2));
    // Release in the order 2, 0, 1: LRU order of the cached ones; block 3 becomes plain free.
    const std::vector<int32_t> order{blocks[2], blocks[0], blocks[1], blocks[3]};
    pool.release(order);
    QCOMPARE(pool.num_cached_free(), 3);
    QCOMPARE(pool.num_free(), 1);
    verify_accounting(pool);
    // The plain free block goes first; cached content stays findable.
    auto a = pool.allocate(1);
    QCOMPARE(a[0], blocks[3]);
    QCOMPARE(pool.find_cached(key_for(t0)), blocks[0]);
    // Then the least recently released cached block (block 2's content) is evicted.
    auto b = pool.allocate(1);
    QCOMPARE(b[0], blocks[2]);
    QCOMPARE(pool.find_cached(key_for(t2)), -1);
    QCOMPARE(pool.num_evictions(), int64_t{1});
    QCOMPARE(pool.find_cached(key_for(t1)), blocks[1]);
    verify_accounting(pool);
  }

  void a_hit_revives_a_cached_free_block() {
    BlockPool pool(2, 2);
    auto blocks = pool.allocate(1);
    const std::vector<TokenId> t{7, 8};
    pool.cache_block(blocks[0], key_for(t));
    pool.release(blocks);
    QCOMPARE(pool.num_cached_free(), 1);
    pool.acquire(blocks);
    QCOMPARE(pool.num_cached_free(), 0);
    QCOMPARE(pool.num_used(), 1);
    // Now it cannot be evicted: only the other block is available.
    QCOMPARE(pool.num_available(), 1);
    verify_accounting(pool);
  }

  void lookup_never_trusts_the_hash_alone() {
    BlockPool pool(4, 2);
    auto blocks = pool.allocate(2);
    const std::vector<TokenId> t{1, 2}, other{9, 9};
    BlockKey k = key_for(t);
    pool.cache_block(blocks[0], k);
    // Same hash, different tokens (a forced collision): no hit.
    BlockKey collision = k;
    collision.tokens = other;
    QCOMPARE(pool.find_cached(collision), -1);
    // Same hash and tokens, different extra key (e.g. another LoRA): no hit.
    BlockKey lora = k;
    lora.extra_key = 5;
    QCOMPARE(pool.find_cached(lora), -1);
    // Same hash and tokens, different parent: no hit.
    BlockKey reparented = k;
    reparented.parent = pool.ref(blocks[1]);
    QCOMPARE(pool.find_cached(reparented), -1);
    QCOMPARE(pool.find_cached(k), blocks[0]);
  }

  void a_reused_parent_invalidates_its_children() {
    BlockPool pool(2, 2);
    auto c = pool.allocate(2);
    const std::vector<TokenId> t0{1, 2}, t1{3, 4};
    const BlockKey k0 = key_for(t0);
    pool.cache_block(c[0], k0);
    pool.cache_block(c[1], key_for(t1, pool.ref(c[0]), 0, k0.hash));
    QCOMPARE(pool.find_cached(key_for(t1, pool.ref(c[0]), 0, k0.hash)), c[1]);
    pool.release(std::vector<int32_t>{c[0]});  // the parent alone in the LRU
    auto reused = pool.allocate(1);            // evicts and reuses it
    QCOMPARE(reused[0], c[0]);
    pool.cache_block(reused[0], k0);  // the same content again, in a new generation
    QCOMPARE(pool.find_cached(k0), c[0]);
    // The child was cached under the old generation: it no longer matches.
    QCOMPARE(pool.find_cached(key_for(t1, pool.ref(reused[0]), 0, k0.hash)), -1);
  }

  void reset_prefix_cache_forgets_everything() {
    BlockPool pool(3, 2);
    auto blocks = pool.allocate(2);
    const std::vector<TokenId> t0{1, 2}, t1{3, 4};
    pool.cache_block(blocks[0], key_for(t0));
    pool.cache_block(blocks[1], key_for(t1));
    pool.release(std::span<const int32_t>(blocks.data(), 1));
    pool.reset_prefix_cache();
    QCOMPARE(pool.num_cached_free(), 0);
    QCOMPARE(pool.num_free(), 2);
    QCOMPARE(pool.num_used(), 1);
    QCOMPARE(pool.find_cached(key_for(t1)), -1);
    verify_accounting(pool);
  }

  void manager_shares_a_prefix_by_reference() {
    KvCacheManager kv({/*num_blocks=*/16, /*block_size=*/4, /*enable_prefix_caching=*/true});
    const auto prompt = iota_tokens(10);
    QCOMPARE(kv.find_prefix_hit(prompt, 0).num_tokens, 0);
    QVERIFY(kv.allocate(1, 10));
    QCOMPARE(int(kv.block_table(1).size()), 3);
    kv.cache_blocks(1, prompt, 10, 0);  // two full blocks published
    const PrefixHit hit = kv.find_prefix_hit(prompt, 0);
    QCOMPARE(hit.num_tokens, 8);
    QVERIFY(kv.allocate(2, 10, hit));
    const auto t1 = kv.block_table(1), t2 = kv.block_table(2);
    QCOMPARE(t2[0], t1[0]);
    QCOMPARE(t2[1], t1[1]);
    QVERIFY(t2[2] != t1[2]);
    QCOMPARE(kv.pool().ref_count(t1[0]), 2);
    QCOMPARE(kv.usage().used, 4);
    kv.free(1);
    QCOMPARE(kv.pool().ref_count(t2[0]), 1);
    QCOMPARE(kv.usage().used, 3);
    kv.free(2);
    QCOMPARE(kv.usage().used, 0);
    QCOMPARE(kv.usage().cached_free, 2);
    QCOMPARE(kv.num_requests(), 0);
  }

  void a_hit_always_leaves_one_token_to_compute() {
    KvCacheManager kv({16, 4, true});
    const auto prompt = iota_tokens(8);  // exactly two blocks
    QVERIFY(kv.allocate(1, 8));
    kv.cache_blocks(1, prompt, 8, 0);
    // All 8 tokens are cached, but the last must be computed to sample: only one block hits.
    QCOMPARE(kv.find_prefix_hit(prompt, 0).num_tokens, 4);
    auto longer = prompt;
    longer.push_back(1);
    QCOMPARE(kv.find_prefix_hit(longer, 0).num_tokens, 8);
    // A different second block stops the chain after the first.
    auto diverging = prompt;
    diverging[5] = 999;
    diverging.push_back(1);
    QCOMPARE(kv.find_prefix_hit(diverging, 0).num_tokens, 4);
    QCOMPARE(kv.find_prefix_hit(longer, /*extra_key=*/3).num_tokens, 0);
    kv.free(1);
  }

  void query_then_commit_changes_nothing_on_failure() {
    KvCacheManager kv({4, 4, true});
    QVERIFY(kv.allocate(1, 12));  // 3 blocks
    QVERIFY(!kv.can_allocate(2, 8));
    QVERIFY(!kv.allocate(2, 8));
    QVERIFY(!kv.has_request(2));
    QCOMPARE(kv.usage().used, 3);
    QVERIFY(kv.can_allocate(2, 4));
    QCOMPARE(kv.usage().used, 3);  // a query changes nothing
    QVERIFY(kv.allocate(1, 16));   // growth within the pool
    QVERIFY(!kv.allocate(1, 17));
    QCOMPARE(int(kv.block_table(1).size()), 4);
    kv.free(1);
    QCOMPARE(kv.usage().free, 4);
  }

  void reviving_cached_free_hit_blocks_counts_against_the_pool() {
    KvCacheManager kv({4, 4, true});
    const auto prompt = iota_tokens(9);
    QVERIFY(kv.allocate(1, 9));
    kv.cache_blocks(1, prompt, 9, 0);
    kv.free(1);
    QCOMPARE(kv.usage().cached_free, 2);
    QCOMPARE(kv.usage().free, 2);
    const PrefixHit hit = kv.find_prefix_hit(prompt, 0);
    QCOMPARE(hit.num_tokens, 8);
    // 16 tokens need 4 blocks: 2 revived from the cache + 2 new: fits exactly.
    QVERIFY(kv.can_allocate(2, 16, hit));
    // 17 tokens need 5: the revived blocks cannot also be evicted to make room.
    QVERIFY(!kv.can_allocate(2, 17, hit));
    QVERIFY(kv.allocate(2, 16, hit));
    QCOMPARE(kv.usage().used, 4);
    kv.free(2);
    QCOMPARE(kv.usage().used, 0);
  }

  void freeing_releases_tails_before_prefixes() {
    KvCacheManager kv({3, 2, true});
    const auto prompt = iota_tokens(6);
    QVERIFY(kv.allocate(1, 6));
    kv.cache_blocks(1, prompt, 6, 0);
    const std::vector<int32_t> table(kv.block_table(1).begin(), kv.block_table(1).end());
    kv.free(1);
    QCOMPARE(kv.usage().cached_free, 3);
    // A new request evicts the last block of the old one first: the shared prefix lives longest.
    QVERIFY(kv.allocate(2, 2));
    QCOMPARE(kv.block_table(2)[0], table[2]);
    auto longer = prompt;
    longer.push_back(0);
    QCOMPARE(kv.find_prefix_hit(longer, 0).num_tokens, 4);
    kv.free(2);
  }

  void prefix_caching_off_never_hits() {
    KvCacheManager kv({8, 4, false});
    const auto prompt = iota_tokens(9);
    QVERIFY(kv.allocate(1, 9));
    kv.cache_blocks(1, prompt, 9, 0);
    QCOMPARE(kv.find_prefix_hit(prompt, 0).num_tokens, 0);
    kv.free(1);
    QCOMPARE(kv.usage().cached_free, 0);
    QCOMPARE(kv.usage().free, 8);
  }

  void identical_content_computed_twice_keeps_one_canonical_chain() {
    KvCacheManager kv({16, 2, true});
    const auto prompt = iota_tokens(7);
    // Two requests compute the same prompt at the same time (neither hit the other).
    QVERIFY(kv.allocate(1, 7));
    QVERIFY(kv.allocate(2, 7));
    kv.cache_blocks(1, prompt, 7, 0);
    kv.cache_blocks(2, prompt, 7, 0);
    QCOMPARE(kv.find_prefix_hit(prompt, 0).num_tokens, 6);
    kv.free(1);  // the canonical chain's holder leaves; its blocks stay cached
    QCOMPARE(kv.find_prefix_hit(prompt, 0).num_tokens, 6);
    kv.free(2);
    QCOMPARE(kv.usage().used, 0);
  }

  // Speculative decoding: a step computes the verified tokens and drafts; the drafts are rejected
  // and truncate() gives back the blocks wholly past the kept tokens, last block first.
  void truncate_frees_the_tail_last_block_first() {
    KvCacheManager kv({8, 4, true});
    const auto verified = iota_tokens(6);
    QVERIFY(kv.allocate(1, 6 + 5));  // 6 verified tokens and 5 drafts: 3 blocks
    const std::vector<int32_t> table(kv.block_table(1).begin(), kv.block_table(1).end());
    QCOMPARE(int(table.size()), 3);
    kv.cache_blocks(1, verified, 11, 0);  // only verified tokens are ever passed: one full block
    QCOMPARE(kv.usage().used, 3);
    kv.truncate(1, 7);  // 6 tokens and the one sampled after them: blocks 0 and 1 stay
    QCOMPARE(int(kv.block_table(1).size()), 2);
    QCOMPARE(kv.block_table(1)[1], table[1]);
    QCOMPARE(kv.usage().used, 2);
    QCOMPARE(kv.usage().free, 6);
    kv.truncate(1, 8);  // nothing past the kept tokens: no change
    QCOMPARE(int(kv.block_table(1).size()), 2);
    // Growing again after a truncate works as usual.
    QVERIFY(kv.allocate(1, 13));
    QCOMPARE(int(kv.block_table(1).size()), 4);
    kv.truncate(1,
                1);  // last block first: table[3], then table[2] and table[1] go to the free list
    QCOMPARE(int(kv.block_table(1).size()), 1);
    QCOMPARE(kv.pool().ref_count(table[0]), 1);
    kv.truncate(999, 0);  // unknown ids are ignored
    kv.free(1);
    QCOMPARE(kv.usage().used, 0);
    QCOMPARE(kv.usage().used + kv.usage().cached_free + kv.usage().free, 8);
  }

  void truncating_published_blocks_shortens_the_chain() {
    KvCacheManager kv({8, 2, true});
    const auto prompt = iota_tokens(7);
    QVERIFY(kv.allocate(1, 7));
    kv.cache_blocks(1, prompt, 7, 0);  // three published blocks
    kv.truncate(1, 3);                 // keeps two blocks; the third stays cached-free
    QCOMPARE(int(kv.block_table(1).size()), 2);
    QCOMPARE(kv.usage().cached_free, 1);
    // Republishing from the shortened chain finds the same content again (no duplicate chain).
    QVERIFY(kv.allocate(1, 7));
    kv.cache_blocks(1, prompt, 7, 0);
    QCOMPARE(kv.find_prefix_hit(prompt, 0).num_tokens, 6);
    kv.free(1);
    QCOMPARE(kv.usage().used, 0);
  }

  // Drafts are never hashed: a block that held a rejected draft is found by no other request, even
  // one whose prompt is exactly the verified tokens followed by those drafts.
  void a_rejected_drafts_block_is_never_found() {
    KvCacheManager kv({8, 4, true});
    const auto verified = iota_tokens(6);
    const std::vector<TokenId> drafts{900, 901, 902};
    // The step that verifies the drafts is scheduled: blocks for 6 + 3 positions, published up to
    // the verified tokens only (the scheduler passes the sequence's tokens, which exclude drafts).
    QVERIFY(kv.allocate(1, 9));
    kv.cache_blocks(1, verified, 9, 0);
    auto guess = verified;
    guess.insert(guess.end(), drafts.begin(), drafts.end());
    guess.insert(guess.end(), {5, 6, 7, 8});
    QCOMPARE(kv.find_prefix_hit(guess, 0).num_tokens, 4);  // the verified block only
    // All drafts rejected: the sequence keeps 6 tokens + 1 sampled; block 2 (positions 8..11) goes.
    kv.truncate(1, 7);
    QCOMPARE(kv.find_prefix_hit(guess, 0).num_tokens, 4);
    kv.free(1);
    QCOMPARE(kv.find_prefix_hit(guess, 0).num_tokens, 4);
    QCOMPARE(kv.usage().cached_free, 1);
  }
};

QTEST_GUILESS_MAIN(KvTest)
#include "kv_test.moc"
