#include "engine/model/memory_estimate.h"

#include <unistd.h>

#include <algorithm>

#include "engine/core/strings.h"

namespace lathe {

MemoryEstimate estimate_memory(const ModelConfig& c, int64_t stored_weight_bytes,
                               int64_t max_model_len, int64_t num_sequences) {
  MemoryEstimate m;
  m.num_parameters = c.num_parameters();
  m.weight_bytes_fp16 = m.num_parameters * 2;
  m.weight_bytes_int8 = m.num_parameters;
  m.weight_bytes_int4 = (m.num_parameters + 1) / 2;
  m.weight_bytes_stored = stored_weight_bytes;
  m.kv_bytes_per_token_fp16 = c.kv_bytes_per_token(2);
  m.kv_bytes_per_token_fp32 = c.kv_bytes_per_token(4);
  m.max_model_len = max_model_len > 0 ? max_model_len : c.max_position_embeddings;
  m.num_sequences = std::max<int64_t>(1, num_sequences);
  m.kv_bytes_fp16 = m.kv_bytes_per_token_fp16 * m.max_model_len * m.num_sequences;
  m.kv_bytes_fp32 = m.kv_bytes_per_token_fp32 * m.max_model_len * m.num_sequences;
  return m;
}

const char* fit_kind_name(FitKind kind) {
  switch (kind) {
    case FitKind::kFits:
      return "fits";
    case FitKind::kFitsFewerSequences:
      return "fits_fewer_sequences";
    case FitKind::kDoesNotFit:
      return "does_not_fit";
  }
  return "unknown";
}

FitVerdict check_fit(const FitRequest& r) {
  FitVerdict v;
  const int64_t seqs = std::max<int64_t>(1, r.num_sequences);
  const int64_t len = std::max<int64_t>(1, r.max_model_len);
  const int64_t per_seq = r.kv_bytes_per_token * len;
  const int64_t fixed = r.weight_bytes + r.overhead_bytes;
  v.needed_bytes = fixed + per_seq * seqs;
  const int64_t left = r.budget_bytes - fixed;
  v.max_kv_tokens = left > 0 && r.kv_bytes_per_token > 0 ? left / r.kv_bytes_per_token : 0;
  v.max_sequences = left > 0 && per_seq > 0 ? left / per_seq : 0;
  const std::string budget = format_bytes(static_cast<double>(r.budget_bytes));

  if (left <= 0) {
    v.kind = FitKind::kDoesNotFit;
    v.message = "does not fit: the weights" +
                std::string(r.overhead_bytes > 0 ? " and runtime overhead" : "") + " alone need " +
                format_bytes(static_cast<double>(fixed)) + " of " + budget;
    if (r.int4_weight_bytes > 0 && r.int4_weight_bytes < r.weight_bytes)
      v.message += "; a 4-bit quantization (about " +
                   format_bytes(static_cast<double>(r.int4_weight_bytes)) +
                   " of weights) or more memory is needed";
    else
      v.message += "; more memory is needed";
    return v;
  }
  if (v.max_sequences >= seqs) {
    v.kind = FitKind::kFits;
    v.message =
        "fits: needs " + format_bytes(static_cast<double>(v.needed_bytes)) + " of " + budget;
    if (seqs == 1 && v.max_sequences > 1)
      v.message += strformat(" (room for %lld sequences of %lld tokens)",
                             static_cast<long long>(v.max_sequences), static_cast<long long>(len));
    return v;
  }
  const int64_t len_for_all = v.max_kv_tokens / seqs;
  if (v.max_sequences >= 1) {
    v.kind = FitKind::kFitsFewerSequences;
    v.message = strformat("fits %lld of %lld sequences of %lld tokens in %s",
                          static_cast<long long>(v.max_sequences), static_cast<long long>(seqs),
                          static_cast<long long>(len), budget.c_str());
    if (len_for_all > 0)
      v.message += strformat("; for all %lld use a max model length of at most %lld tokens",
                             static_cast<long long>(seqs), static_cast<long long>(len_for_all));
    return v;
  }
  v.kind = FitKind::kDoesNotFit;
  v.message = strformat(
      "does not fit: one sequence of %lld tokens needs %s of KV cache, but only %s are left after "
      "the weights; use a max model length of at most %lld tokens",
      static_cast<long long>(len), format_bytes(static_cast<double>(per_seq)).c_str(),
      format_bytes(static_cast<double>(left)).c_str(), static_cast<long long>(v.max_kv_tokens));
  return v;
}

int64_t system_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page);
}

}  // namespace lathe
