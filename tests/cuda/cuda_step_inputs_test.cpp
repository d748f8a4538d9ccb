// The CUDA runner's host-side step packing (engine/backend/cuda/step_inputs.h): no GPU needed, so
// it runs in CI. Checks the packed layout the kernels read: page lists in CSR form with the last
// page's length, padding of a decode step to a graph bucket, the LM-head rows and the sampling
// rows' logits rows in eager and graph form, banned ids and penalty histories, steps with draft
// tokens (several sampled rows per sequence, one shared penalty history), allowed-token masks
// packed now or left for later (late-bound sampling rows), and the validation of inputs that would
// make a kernel read or write outside the cache.
#include <QtTest>

#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/backend/cuda/step_inputs.h"
#include "engine/runtime/token_constraint.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::cuda;

namespace {

StepLimits limits() {
  StepLimits l;
  l.max_tokens = 64;
  l.max_seqs = 8;
  l.block_size = 4;
  l.num_blocks = 32;
  l.max_pages = 64;
  l.vocab_size = 100;
  return l;
}

// Two sequences: s0 prefill chunk of 3 tokens at positions 5..7 (context 8, blocks 9 and 2), s1 a
// decode at position 4 (context 5, blocks 7 and 30).
ModelInput two_seqs() {
  ModelInput in;
  in.token_ids = {11, 12, 13, 14};
  in.positions = {5, 6, 7, 4};
  in.max_blocks_per_seq = 3;
  in.block_tables = {9, 2, 0, 7, 30, 0};
  in.slot_mapping = {2 * 4 + 1, 2 * 4 + 2, 2 * 4 + 3, 30 * 4 + 0};
  in.query_start = {0, 3, 4};
  in.seq_lens = {8, 5};
  in.max_seq_len = 8;
  in.max_query_len = 3;
  in.sample_seqs = {0, 1};
  SamplingRow a, b;
  a.temperature = 0.f;
  a.banned_tokens = {3, 4};
  b.repetition_penalty = 1.2f;
  b.history_tokens = {1, 2, 3, 14};
  b.history_prompt_len = 3;
  b.num_logprobs = 2;
  in.sampling = {a, b};
  return in;
}

// A constraint whose every state allows one mask; counts lookups.
class CountingConstraint final : public TokenConstraint {
 public:
  explicit CountingConstraint(std::shared_ptr<const TokenMask> mask) : mask_(std::move(mask)) {}
  int32_t start() const override { return 0; }
  int32_t advance(int32_t state, TokenId) override { return state; }
  std::shared_ptr<const TokenMask> allowed(int32_t state, std::span<const TokenId>) override {
    ++lookups;
    last_state = state;
    return mask_;
  }
  int lookups = 0, last_state = -1;

 private:
  std::shared_ptr<const TokenMask> mask_;
};

}  // namespace

class CudaStepInputsTest : public QObject {
  Q_OBJECT
 private slots:
  void packs_an_eager_step() {
    const ModelInput in = two_seqs();
    LATHE_QVERIFY_OK(check_step(in, limits()));
    std::vector<uint8_t> host(4096, 0xAB);
    PackedStep p;
    LATHE_QVERIFY_OK(pack_step(in, limits(), 0, false, host.data(), 4096, 4096, &p));
    QCOMPARE(p.num_tokens, 4);
    QCOMPARE(p.num_seqs, 2);
    QCOMPARE(p.num_samples, 2);
    QCOMPARE(p.num_lm_rows, 2);
    QCOMPARE(p.num_pages, int64_t{4});
    QVERIFY(p.needs_processing);
    QVERIFY(p.needs_logprobs);
    const StepArrays a = StepArrays::at(host.data(), p.layout);
    QCOMPARE(a.kv_indptr[0], 0);
    QCOMPARE(a.kv_indptr[1], 2);
    QCOMPARE(a.kv_indptr[2], 4);
    QCOMPARE(a.kv_indices[0], 9);
    QCOMPARE(a.kv_indices[1], 2);
    QCOMPARE(a.kv_indices[2], 7);
    QCOMPARE(a.kv_indices[3], 30);
    QCOMPARE(a.kv_last_page_len[0], 4);  // context 8 = 2 full pages of 4
    QCOMPARE(a.kv_last_page_len[1], 1);  // context 5
    QCOMPARE(a.lm_rows[0], 2);           // last token of s0
    QCOMPARE(a.lm_rows[1], 3);
    QCOMPARE(a.sampling[0].logits_row, 0);
    QCOMPARE(a.sampling[1].logits_row, 1);
    QCOMPARE(a.slot_mapping[3], int64_t{120});
    const int32_t* banned = reinterpret_cast<const int32_t*>(host.data() + p.banned_offset);
    QCOMPARE(a.sampling[0].banned_end - a.sampling[0].banned_begin, 2);
    QCOMPARE(banned[a.sampling[0].banned_begin + 1], 4);
    const int32_t* hist = reinterpret_cast<const int32_t*>(host.data() + p.history_offset);
    QCOMPARE(a.sampling[1].history_end - a.sampling[1].history_begin, 4);
    QCOMPARE(a.sampling[1].history_prompt_end - a.sampling[1].history_begin, 3);
    QCOMPARE(hist[a.sampling[1].history_begin + 3], 14);
    QCOMPARE(a.sampling[0].history_end, a.sampling[0].history_begin);  // no penalties: no history
    QVERIFY(p.bytes <= step_bytes(in, limits(), 0));
  }

  // Late-bound sampling rows: a step with an allowed-token mask packed with MaskPacking::kLater has
  // no mask words (mask_begin -1, fewer bytes, no processing for a row with only a mask) and the
  // same forward arrays as with kNow, which packs the mask's words where mask_begin says, the
  // words past a short mask zero (nothing allowed).
  void packs_masks_now_or_later() {
    ModelInput in = two_seqs();
    in.sampling[0].banned_tokens.clear();
    in.sampling[1] = SamplingRow{};
    in.sampling[1].allowed = std::make_shared<TokenMask>(TokenMask{0x5u, 0x80000000u});
    const int64_t later_bytes = step_bytes(in, limits(), 0, 1, MaskPacking::kLater);
    const int64_t now_bytes = step_bytes(in, limits(), 0, 1, MaskPacking::kNow);
    QCOMPARE(now_bytes - later_bytes, int64_t{16});  // ceil(100 / 32) = 4 words
    std::vector<uint8_t> later(4096, 0xAB), now(4096, 0xAB);
    PackedStep pl, pn;
    LATHE_QVERIFY_OK(
        pack_step(in, limits(), 0, false, later.data(), 4096, 4096, &pl, 1, MaskPacking::kLater));
    LATHE_QVERIFY_OK(pack_step(in, limits(), 0, false, now.data(), 4096, 4096, &pn));
    const StepArrays al = StepArrays::at(later.data(), pl.layout);
    const StepArrays an = StepArrays::at(now.data(), pn.layout);
    QCOMPARE(al.sampling[1].mask_begin, -1);
    QVERIFY(!pl.needs_processing && !pl.has_masks);
    QCOMPARE(pl.bytes + 16, pn.bytes);
    QCOMPARE(an.sampling[1].mask_begin, 0);
    QCOMPARE(an.sampling[1].mask_in_cache, 0);
    // A mask alone needs no processing pass (the sampler reads it), only has_masks.
    QVERIFY(pn.has_masks && !pn.needs_processing);
    const uint32_t* words = reinterpret_cast<const uint32_t*>(now.data() + pn.mask_offset);
    QCOMPARE(words[0], 0x5u);
    QCOMPARE(words[1], 0x80000000u);
    QCOMPARE(words[2], 0u);
    QCOMPARE(words[3], 0u);
    // What the forward pass reads is the same bytes either way.
    QCOMPARE(pl.layout.fixed_bytes, pn.layout.fixed_bytes);
    QCOMPARE(std::memcmp(later.data(), now.data(), static_cast<size_t>(pl.layout.sampling)), 0);
    QCOMPARE(std::memcmp(later.data() + pl.layout.kv_indices, now.data() + pn.layout.kv_indices,
                         4 * static_cast<size_t>(pl.num_pages)),
             0);
  }

  // Rows naming a slot of the device mask cache (MaskSlots) pack no words: mask_begin is the
  // slot's first word there; rows without a slot pack theirs, looked up from the row's constraint
  // when the engine left that to the runner (row_mask()). Slots for the wrong number of rows, or
  // past what a row can address, are refused.
  void packs_mask_slots_and_looked_up_masks() {
    ModelInput in = two_seqs();
    in.sampling[0].banned_tokens.clear();
    in.sampling[1] = SamplingRow{};
    auto cached = std::make_shared<TokenMask>(TokenMask{0x1u, 0, 0, 0});
    in.sampling[0].allowed = cached;
    CountingConstraint looked_up(std::make_shared<TokenMask>(TokenMask{0x6u, 0x1u}));
    const std::vector<TokenId> end_ids = {2};
    in.sampling[1].constraint = &looked_up;
    in.sampling[1].constraint_state = 5;
    in.sampling[1].constraint_end_ids = end_ids;
    const std::vector<int32_t> row_slots = {3, -1};
    const int64_t all_words = step_bytes(in, limits(), 0, 1, MaskPacking::kNow);
    const int64_t with_slots = step_bytes(in, limits(), 0, 1, MaskPacking::kNow, row_slots);
    QCOMPARE(all_words - with_slots, int64_t{16});  // row 0's 4 words are in the cache
    std::vector<uint8_t> host(4096, 0xAB);
    PackedStep p;
    LATHE_QVERIFY_OK(pack_step(in, limits(), 0, false, host.data(), 4096, 4096, &p, 1,
                               MaskPacking::kNow, row_slots));
    const StepArrays a = StepArrays::at(host.data(), p.layout);
    QCOMPARE(a.sampling[0].mask_in_cache, 1);
    QCOMPARE(a.sampling[0].mask_begin, 3 * 4);  // slot 3 of 4-word rows
    QCOMPARE(a.sampling[1].mask_in_cache, 0);
    QCOMPARE(a.sampling[1].mask_begin, 0);
    QVERIFY(p.has_masks && !p.needs_processing);
    QCOMPARE(looked_up.lookups, 1);
    QCOMPARE(looked_up.last_state, 5);
    const uint32_t* words = reinterpret_cast<const uint32_t*>(host.data() + p.mask_offset);
    QCOMPARE(words[0], 0x6u);
    QCOMPARE(words[1], 0x1u);
    QCOMPARE(words[2], 0u);  // past the short mask: nothing allowed
    QCOMPARE(words[3], 0u);
    QCOMPARE(p.bytes, p.mask_offset + 16);
    // kLater looks nothing up.
    LATHE_QVERIFY_OK(
        pack_step(in, limits(), 0, false, host.data(), 4096, 4096, &p, 1, MaskPacking::kLater));
    QCOMPARE(looked_up.lookups, 1);
    QVERIFY(!p.has_masks);

    const std::vector<int32_t> short_slots = {3};
    Status st = pack_step(in, limits(), 0, false, host.data(), 4096, 4096, &p, 1, MaskPacking::kNow,
                          short_slots);
    QVERIFY(!st.is_ok());
    QVERIFY2(st.message().find("mask slots for 1 rows") != std::string::npos, st.message().c_str());
    const std::vector<int32_t> far = {INT32_MAX / 2, -1};
    st = pack_step(in, limits(), 0, false, host.data(), 4096, 4096, &p, 1, MaskPacking::kNow, far);
    QVERIFY(!st.is_ok());
    QVERIFY2(st.message().find("past what a row can address") != std::string::npos,
             st.message().c_str());
  }

  void pads_a_decode_step_to_its_bucket() {
    ModelInput in;
    in.token_ids = {5, 6, 7};
    in.positions = {0, 3, 1};
    in.max_blocks_per_seq = 1;
    in.block_tables = {4, 5, 6};
    in.slot_mapping = {16, 23, 25};
    in.query_start = {0, 1, 2, 3};
    in.seq_lens = {1, 4, 2};
    in.max_seq_len = 4;
    in.max_query_len = 1;
    in.sample_seqs = {0, 2};
    in.sampling.resize(2);
    LATHE_QVERIFY_OK(check_step(in, limits()));
    std::vector<uint8_t> host(4096);
    PackedStep p;
    LATHE_QVERIFY_OK(pack_step(in, limits(), 4, true, host.data(), 4096, 4096, &p));
    QCOMPARE(p.num_tokens, 4);
    QCOMPARE(p.num_seqs, 4);
    QCOMPARE(p.num_lm_rows, 4);
    QCOMPARE(p.layout.fixed_bytes,
             StepLayout::make(4, 4).fixed_bytes);  // the graph's fixed addresses
    const StepArrays a = StepArrays::at(host.data(), p.layout);
    QCOMPARE(a.query_start[4], 4);
    QCOMPARE(a.seq_lens[3], 0);
    QCOMPARE(a.slot_mapping[3], int64_t{-1});
    QCOMPARE(a.token_ids[3], 0);
    QCOMPARE(a.kv_indptr[4], a.kv_indptr[3]);  // no pages for the padding row
    for (int i = 0; i < 4; ++i) QCOMPARE(a.lm_rows[i], i);
    QCOMPARE(a.sampling[0].logits_row, 0);
    QCOMPARE(a.sampling[1].logits_row, 2);  // graph rows: the sequence's row
  }

  // s0 verifies 3 drafts: 4 tokens at positions 8..11 (context 12, blocks 3, 5, 6), all 4 rows
  // sampled with penalties; s1 decodes one token at position 4 (context 5, blocks 7 and 30).
  void packs_a_step_with_drafts() {
    ModelInput in;
    in.token_ids = {21, 22, 23, 24, 14};
    in.positions = {8, 9, 10, 11, 4};
    in.max_blocks_per_seq = 3;
    in.block_tables = {3, 5, 6, 7, 30, 0};
    in.slot_mapping = {6 * 4 + 0, 6 * 4 + 1, 6 * 4 + 2, 6 * 4 + 3, 30 * 4 + 0};
    in.query_start = {0, 4, 5};
    in.seq_lens = {12, 5};
    in.max_seq_len = 12;
    in.max_query_len = 4;
    in.sample_seqs = {0, 1};
    in.sample_counts = {4, 1};
    std::vector<TokenId> history{1, 2, 3, 4, 5, 6, 7, 8, 21};  // prompt 6 ++ 3 outputs
    for (int j = 0; j < 4; ++j) {
      SamplingRow r;
      r.repetition_penalty = 1.1f;
      r.step = static_cast<uint64_t>(3 + j);
      r.history_tokens = history;
      r.history_prompt_len = 6;
      if (j < 2) r.banned_tokens = {2};
      in.sampling.push_back(r);
      history.push_back(in.token_ids[static_cast<size_t>(1 + j)]);  // row j+1 sees draft j+1
    }
    in.sampling.push_back(SamplingRow{});
    LATHE_QVERIFY_OK(check_step(in, limits()));
    std::vector<uint8_t> host(4096, 0xAB);
    PackedStep p;
    LATHE_QVERIFY_OK(pack_step(in, limits(), 0, false, host.data(), 4096, 4096, &p));
    QCOMPARE(p.num_samples, 5);
    QCOMPARE(p.num_lm_rows, 5);
    QCOMPARE(p.layout.fixed_bytes, StepLayout::make(5, 2, 5).fixed_bytes);
    QVERIFY(p.layout.fixed_bytes > StepLayout::make(5, 2).fixed_bytes);  // 5 row slots, not 2
    QVERIFY(p.needs_processing);
    const StepArrays a = StepArrays::at(host.data(), p.layout);
    for (int r = 0; r < 5; ++r) {
      QCOMPARE(a.lm_rows[r], r);  // s0's 4 trailing tokens, then s1's one
      QCOMPARE(a.sampling[r].logits_row, r);
    }
    QCOMPARE(a.sampling[2].step, uint64_t{5});
    QCOMPARE(a.sampling[1].banned_end - a.sampling[1].banned_begin, 1);
    QCOMPARE(a.sampling[2].banned_end, a.sampling[2].banned_begin);
    // One history for s0's rows: row j reads the first 9 + j tokens of it.
    const int32_t* hist = reinterpret_cast<const int32_t*>(host.data() + p.history_offset);
    for (int j = 0; j < 4; ++j) {
      const DeviceSamplingRow& d = a.sampling[j];
      QCOMPARE(d.history_begin, a.sampling[0].history_begin);
      QCOMPARE(d.history_prompt_end - d.history_begin, 6);
      QCOMPARE(d.history_end - d.history_begin, 9 + j);
      for (int t = 0; t < 9 + j; ++t)
        QCOMPARE(hist[d.history_begin + t], in.sampling[j].history_tokens[t]);
    }
    QCOMPARE(p.bytes, p.history_offset + 4 * int64_t{9 + 3});  // shared, not 9 + 10 + 11 + 12
    QVERIFY(p.bytes <= step_bytes(in, limits(), 0));

    // A decode graph runs one token per sequence: it refuses drafts.
    QVERIFY(!pack_step(in, limits(), 2, true, host.data(), 4096, 4096, &p).is_ok());
    // More sampled rows than the runner planned for.
    StepLimits small = limits();
    small.max_sample_rows = 4;
    const Status st = check_step(in, small);
    QVERIFY(!st.is_ok());
    QVERIFY2(st.message().find("samples 5 rows") != std::string::npos, st.message().c_str());
    small.max_sample_rows = 0;
    small.max_seqs = 4;  // 0: one row per sequence at most
    QVERIFY(!check_step(in, small).is_ok());
    // A count larger than the sequence's query.
    ModelInput bad = in;
    bad.sample_counts = {4, 2};
    bad.sampling.push_back(SamplingRow{});
    QVERIFY(!check_step(bad, limits()).is_ok());
  }

  void refuses_inputs_outside_the_cache() {
    StepLimits l = limits();
    ModelInput in = two_seqs();
    in.block_tables[1] = 32;  // block id == num_blocks
    QVERIFY(!check_step(in, l).is_ok());
    in = two_seqs();
    in.slot_mapping[0] = 3;  // not the slot of position 5 in block 2
    QVERIFY(!check_step(in, l).is_ok());
    in = two_seqs();
    in.token_ids[2] = 100;  // outside the vocabulary
    QVERIFY(!check_step(in, l).is_ok());
    in = two_seqs();
    in.positions[1] = 9;
    QVERIFY(!check_step(in, l).is_ok());
    in = two_seqs();
    in.sampling[1].num_logprobs = kMaxTopLogprobs + 1;
    QVERIFY(!check_step(in, l).is_ok());
    l.max_tokens = 3;  // the step has 4 tokens
    QVERIFY(!check_step(two_seqs(), l).is_ok());
  }

  void refuses_steps_larger_than_the_buffers() {
    const ModelInput in = two_seqs();
    std::vector<uint8_t> host(4096);
    PackedStep p;
    QVERIFY(!pack_step(in, limits(), 0, false, host.data(), 4096, 64, &p).is_ok());
  }
};

QTEST_GUILESS_MAIN(CudaStepInputsTest)
#include "cuda_step_inputs_test.moc"
