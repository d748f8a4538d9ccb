#include "engine/backend/cuda/step_inputs.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "engine/core/strings.h"
#include "engine/runtime/model_input_check.h"
#include "engine/runtime/token_constraint.h"

namespace lathe::cuda {
namespace {

int64_t align16(int64_t v) {
  return (v + 15) / 16 * 16;
}

bool has_penalties(const SamplingRow& r) {
  return r.repetition_penalty != 1.0f || r.presence_penalty != 0.0f || r.frequency_penalty != 0.0f;
}

int64_t pages_of(int32_t seq_len, int32_t block_size) {
  return (seq_len + block_size - 1) / block_size;
}

// Row `cur` of a sequence with drafts extends the penalty history of the row before it (`prev`, of
// the same sequence) by one token, so it can share prev's history instead of a copy of its own.
bool extends_history(const SamplingRow& prev, const SamplingRow& cur) {
  return has_penalties(prev) && has_penalties(cur) &&
         cur.history_tokens.size() == prev.history_tokens.size() + 1 &&
         cur.history_prompt_len == prev.history_prompt_len &&
         std::equal(prev.history_tokens.begin(), prev.history_tokens.end(),
                    cur.history_tokens.begin());
}

// Calls f(row, first_of_its_sequence) for every sampled row of `in`, in order.
template <typename F>
void for_each_row(const ModelInput& in, F&& f) {
  size_t row = 0;
  for (size_t i = 0; i < in.sample_seqs.size(); ++i)
    for (int32_t j = 0; j < in.sample_count(i); ++j) f(row++, j == 0);
}

// Words of an allowed-token mask for a vocabulary of `vocab`.
int64_t mask_words(int64_t vocab) {
  return (vocab + 31) / 32;
}

// Whether pack_step() writes row r's mask words (MaskPacking, MaskSlots).
bool packs_words(const SamplingRow& row, size_t r, MaskPacking masks, MaskSlots mask_slots) {
  return row.is_constrained() && masks == MaskPacking::kNow &&
         (r >= mask_slots.size() || mask_slots[r] < 0);
}

// 4-byte words of the banned, history, bias and mask tails of `in`'s sampling rows, as pack_step()
// writes them (without the alignment between sections).
int64_t tail_tokens(const ModelInput& in, int64_t vocab, MaskPacking masks, MaskSlots mask_slots) {
  int64_t tail = 0;
  for_each_row(in, [&](size_t r, bool first) {
    const SamplingRow& row = in.sampling[r];
    tail += static_cast<int64_t>(row.banned_tokens.size());
    tail += 2 * static_cast<int64_t>(row.logit_bias.size());
    if (packs_words(row, r, masks, mask_slots)) tail += mask_words(vocab);
    if (!has_penalties(row)) return;
    tail += !first && extends_history(in.sampling[r - 1], row)
                ? 1
                : static_cast<int64_t>(row.history_tokens.size());
  });
  return tail;
}

// Row slots of the layout: one per sequence, or per sampled row when those are more.
int32_t row_slots(const ModelInput& in, int32_t s_count) {
  return std::max(s_count, in.num_sample_rows());
}

}  // namespace

StepLayout StepLayout::make(int64_t t, int64_t s, int64_t r) {
  r = std::max(r, s);
  StepLayout l;
  int64_t off = 0;
  auto take = [&off](int64_t bytes) {
    const int64_t o = off;
    off = align16(off + bytes);
    return o;
  };
  l.token_ids = take(4 * t);
  l.positions = take(4 * t);
  l.slot_mapping = take(8 * t);
  l.query_start = take(4 * (s + 1));
  l.seq_lens = take(4 * s);
  l.kv_indptr = take(4 * (s + 1));
  l.kv_last_page_len = take(4 * s);
  l.lm_rows = take(4 * r);
  l.sampling = take(static_cast<int64_t>(sizeof(DeviceSamplingRow)) * r);
  l.kv_indices = off;
  l.fixed_bytes = off;
  return l;
}

StepArrays StepArrays::at(void* base, const StepLayout& l) {
  uint8_t* b = static_cast<uint8_t*>(base);
  StepArrays a;
  a.token_ids = reinterpret_cast<int32_t*>(b + l.token_ids);
  a.positions = reinterpret_cast<int32_t*>(b + l.positions);
  a.slot_mapping = reinterpret_cast<int64_t*>(b + l.slot_mapping);
  a.query_start = reinterpret_cast<int32_t*>(b + l.query_start);
  a.seq_lens = reinterpret_cast<int32_t*>(b + l.seq_lens);
  a.kv_indptr = reinterpret_cast<int32_t*>(b + l.kv_indptr);
  a.kv_last_page_len = reinterpret_cast<int32_t*>(b + l.kv_last_page_len);
  a.lm_rows = reinterpret_cast<int32_t*>(b + l.lm_rows);
  a.sampling = reinterpret_cast<DeviceSamplingRow*>(b + l.sampling);
  a.kv_indices = reinterpret_cast<int32_t*>(b + l.kv_indices);
  return a;
}

Status check_step(const ModelInput& in, const StepLimits& lim) {
  const int32_t t_count = in.num_tokens(), s_count = in.num_seqs();
  if (t_count == 0 || s_count == 0)
    return invalid_argument("a step needs at least one token and one sequence");
  if (t_count > lim.max_tokens)
    return invalid_argument(strformat(
        "step of %d tokens exceeds max-num-batched-tokens (%d) the CUDA runner was planned for",
        t_count, lim.max_tokens));
  if (s_count > lim.max_seqs)
    return invalid_argument(
        strformat("step of %d sequences exceeds max-num-seqs (%d) the CUDA runner was planned for",
                  s_count, lim.max_seqs));
  const int32_t max_rows = lim.max_sample_rows > 0 ? lim.max_sample_rows : lim.max_seqs;
  if (in.num_sample_rows() > max_rows)
    return invalid_argument(strformat(
        "step samples %d rows (sequences and their drafts), more than the %d the CUDA runner was "
        "planned for",
        in.num_sample_rows(), max_rows));
  for (const SamplingRow& row : in.sampling)
    if (row.num_logprobs > lim.max_logprobs)
      return invalid_argument(
          strformat("the CUDA backend returns at most %d top logprobs, %d were asked",
                    lim.max_logprobs, row.num_logprobs));
  int64_t total_pages = 0;
  LATHE_RETURN_IF_ERROR(check_model_input(
      in, ModelInputBounds{lim.num_blocks, lim.block_size, lim.vocab_size}, &total_pages));
  if (total_pages > lim.max_pages)
    return invalid_argument(strformat(
        "step references %lld KV pages, more than the %lld the CUDA runner holds room for",
        static_cast<long long>(total_pages), static_cast<long long>(lim.max_pages)));
  return Status();
}

int64_t step_bytes(const ModelInput& in, const StepLimits& lim, int32_t pad_to,
                   int32_t pad_query_len, MaskPacking masks, MaskSlots mask_slots) {
  const int32_t s_count = std::max(in.num_seqs(), pad_to);
  const int32_t t_count = in.num_tokens() + (s_count - in.num_seqs()) * pad_query_len;
  int64_t pages = 0;
  for (int32_t len : in.seq_lens) pages += pages_of(len, lim.block_size);
  const int64_t tail = tail_tokens(in, lim.vocab_size, masks, mask_slots);
  const int32_t rows = pad_query_len > 1 ? t_count : row_slots(in, s_count);
  return align16(StepLayout::make(t_count, s_count, rows).fixed_bytes + 4 * pages) +
         align16(4 * tail) + 64;
}

Status pack_step(const ModelInput& in, const StepLimits& lim, int32_t pad_to, bool graph_rows,
                 uint8_t* host, int64_t host_capacity, int64_t device_capacity, PackedStep* out,
                 int32_t pad_query_len, MaskPacking masks, MaskSlots mask_slots) {
  const int32_t real_s = in.num_seqs(), real_t = in.num_tokens();
  const int32_t q = std::max(1, pad_query_len);
  const int32_t s_count = std::max(real_s, pad_to);
  const int32_t t_count = real_t + (s_count - real_s) * q;
  if (graph_rows && q == 1 && in.has_drafts())
    return invalid_argument(
        "a decode graph of one token per sequence cannot verify drafts; run the step eagerly");
  if (graph_rows && q > 1) {
    if (real_t != real_s * q || static_cast<int32_t>(in.sample_seqs.size()) != real_s)
      return invalid_argument(strformat(
          "a decode graph of %d tokens per sequence takes steps whose sequences each carry %d "
          "tokens, all sampled",
          q, q));
    for (size_t i = 0; i < in.sample_seqs.size(); ++i)
      if (in.sample_count(i) != q)
        return invalid_argument(
            strformat("a decode graph of %d tokens per sequence samples all %d of them", q, q));
  }
  if (!mask_slots.empty()) {
    if (mask_slots.size() != in.sampling.size())
      return invalid_argument(strformat("mask slots for %zu rows, but the step samples %zu",
                                        mask_slots.size(), in.sampling.size()));
    for (const int32_t k : mask_slots)
      if (int64_t{k} * mask_words(lim.vocab_size) > INT32_MAX)
        return invalid_argument(strformat("mask slot %d is past what a row can address", k));
  }
  const int64_t need = step_bytes(in, lim, pad_to, q, masks, mask_slots);
  if (need > host_capacity || need > device_capacity)
    return invalid_argument(
        strformat("step inputs need %lld bytes, more than the %lld the CUDA runner reserved",
                  static_cast<long long>(need),
                  static_cast<long long>(std::min(host_capacity, device_capacity))));
  PackedStep& p = *out;
  p = PackedStep();
  p.layout = StepLayout::make(t_count, s_count, q > 1 ? t_count : row_slots(in, s_count));
  p.num_tokens = t_count;
  p.num_seqs = s_count;
  StepArrays a = StepArrays::at(host, p.layout);

  std::memcpy(a.token_ids, in.token_ids.data(), sizeof(int32_t) * real_t);
  std::memcpy(a.positions, in.positions.data(), sizeof(int32_t) * real_t);
  std::memcpy(a.slot_mapping, in.slot_mapping.data(), sizeof(int64_t) * real_t);
  std::memcpy(a.query_start, in.query_start.data(), sizeof(int32_t) * (real_s + 1));
  std::memcpy(a.seq_lens, in.seq_lens.data(), sizeof(int32_t) * real_s);
  for (int32_t t = real_t; t < t_count; ++t) {
    a.token_ids[t] = 0;
    a.positions[t] = 0;
    a.slot_mapping[t] = -1;
  }
  for (int32_t s = real_s; s < s_count; ++s) {
    a.query_start[s + 1] = a.query_start[s] + q;
    a.seq_lens[s] = 0;
  }

  // Page lists in CSR form.
  int64_t n = 0;
  a.kv_indptr[0] = 0;
  for (int32_t s = 0; s < s_count; ++s) {
    const int32_t len = a.seq_lens[s];
    const int64_t pages = pages_of(len, lim.block_size);
    if (pages > 0) {
      std::memcpy(a.kv_indices + n,
                  in.block_tables.data() + static_cast<int64_t>(s) * in.max_blocks_per_seq,
                  sizeof(int32_t) * pages);
    }
    n += pages;
    a.kv_indptr[s + 1] = static_cast<int32_t>(n);
    a.kv_last_page_len[s] =
        pages > 0 ? len - static_cast<int32_t>((pages - 1) * lim.block_size) : 0;
  }
  p.num_pages = n;

  // Rows that reach the LM head and the sampling rows that read them.
  const int32_t num_samples = in.num_sample_rows();
  p.num_samples = num_samples;
  if (graph_rows) {
    // Every row of the bucket (one per sequence, or q per sequence).
    for (int32_t t = 0; t < t_count; ++t) a.lm_rows[t] = t;
    p.num_lm_rows = t_count;
  } else {
    int32_t r = 0;
    for (size_t i = 0; i < in.sample_seqs.size(); ++i) {
      const int32_t end = in.query_start[in.sample_seqs[i] + 1];
      for (int32_t row = end - in.sample_count(i); row < end; ++row) a.lm_rows[r++] = row;
    }
    p.num_lm_rows = num_samples;
  }

  p.banned_offset = align16(p.layout.fixed_bytes + 4 * n);
  int32_t* banned = reinterpret_cast<int32_t*>(host + p.banned_offset);
  int64_t nb = 0;
  for (const SamplingRow& r : in.sampling) nb += static_cast<int64_t>(r.banned_tokens.size());
  p.history_offset = align16(p.banned_offset + 4 * nb);
  int32_t* history = reinterpret_cast<int32_t*>(host + p.history_offset);
  int64_t nh = 0, nbias = 0;
  for_each_row(in, [&](size_t i, bool first) {
    const SamplingRow& r = in.sampling[i];
    if (has_penalties(r))
      nh += !first && extends_history(in.sampling[i - 1], r)
                ? 1
                : static_cast<int64_t>(r.history_tokens.size());
    nbias += static_cast<int64_t>(r.logit_bias.size());
  });
  p.bias_offset = align16(p.history_offset + 4 * nh);
  DeviceTokenBias* biases = reinterpret_cast<DeviceTokenBias*>(host + p.bias_offset);
  p.mask_offset = align16(p.bias_offset + 8 * nbias);
  uint32_t* words = reinterpret_cast<uint32_t*>(host + p.mask_offset);
  const int64_t row_words = mask_words(lim.vocab_size);
  int32_t b_used = 0, h_used = 0, bias_used = 0, w_used = 0;
  for_each_row(in, [&](size_t i, bool first) {
    const SamplingRow& r = in.sampling[i];
    DeviceSamplingRow d;
    d.temperature = r.temperature;
    d.top_p = r.top_p;
    d.min_p = r.min_p;
    d.repetition_penalty = r.repetition_penalty;
    d.presence_penalty = r.presence_penalty;
    d.frequency_penalty = r.frequency_penalty;
    d.top_k = r.top_k;
    d.num_logprobs = r.num_logprobs;
    d.seed = r.seed;
    d.step = r.step;
    // Graph rows: q = 1, row i is sample_seqs[i]'s; q > 1, every sequence samples all its q rows,
    // so sampled row i is token row i.
    d.logits_row = graph_rows && q == 1 ? in.sample_seqs[i] : static_cast<int32_t>(i);
    d.banned_begin = b_used;
    if (!r.banned_tokens.empty()) {
      std::memcpy(banned + b_used, r.banned_tokens.data(),
                  sizeof(int32_t) * r.banned_tokens.size());
      b_used += static_cast<int32_t>(r.banned_tokens.size());
      p.needs_processing = true;
    }
    d.banned_end = b_used;
    d.history_begin = d.history_prompt_end = d.history_end = h_used;
    if (has_penalties(r) && !first && extends_history(in.sampling[i - 1], r)) {
      // The previous row's history was written last, ending at h_used: extend it by one token.
      const DeviceSamplingRow& prev = a.sampling[i - 1];
      history[h_used] = r.history_tokens.back();
      h_used += 1;
      d.history_begin = prev.history_begin;
      d.history_prompt_end = prev.history_prompt_end;
      d.history_end = h_used;
      p.needs_processing = true;
    } else if (has_penalties(r)) {
      const int32_t len = static_cast<int32_t>(r.history_tokens.size());
      std::memcpy(history + h_used, r.history_tokens.data(), sizeof(int32_t) * len);
      d.history_prompt_end = h_used + std::clamp(r.history_prompt_len, 0, len);
      h_used += len;
      d.history_end = h_used;
      p.needs_processing = true;
    }
    d.bias_begin = bias_used;
    for (const TokenBias& b : r.logit_bias) biases[bias_used++] = DeviceTokenBias{b.token, b.bias};
    d.bias_end = bias_used;
    if (r.is_constrained() && masks == MaskPacking::kNow && !packs_words(r, i, masks, mask_slots)) {
      // The mask is in the device cache already (or is uploaded there before the sampler runs).
      d.mask_begin = static_cast<int32_t>(static_cast<int64_t>(mask_slots[i]) * row_words);
      d.mask_in_cache = 1;
    } else if (packs_words(r, i, masks, mask_slots)) {
      // A row's mask is looked up here when the engine left it to the runner (row_mask()).
      // Missing words (a mask shorter than the vocabulary) allow nothing, as on the CPU.
      const std::shared_ptr<const TokenMask> mask = row_mask(r);
      const int64_t have =
          mask ? std::min<int64_t>(row_words, static_cast<int64_t>(mask->size())) : 0;
      if (have > 0) std::memcpy(words + w_used, mask->data(), sizeof(uint32_t) * have);
      std::fill(words + w_used + have, words + w_used + row_words, 0u);
      d.mask_begin = w_used;
      w_used += static_cast<int32_t>(row_words);
    }
    if (d.bias_end > d.bias_begin) p.needs_processing = true;
    if (d.mask_begin >= 0) p.has_masks = true;
    if (r.num_logprobs >= 0) p.needs_logprobs = true;
    a.sampling[i] = d;
  });
  p.bytes = w_used > 0 ? p.mask_offset + 4 * static_cast<int64_t>(w_used)
                       : p.bias_offset + 8 * static_cast<int64_t>(bias_used);
  return Status();
}

}  // namespace lathe::cuda
