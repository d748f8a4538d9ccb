#include "engine/runtime/engine_setup.h"

#include <algorithm>

#include "engine/core/strings.h"

namespace lathe {

std::string KvPlan::summary() const {
  return strformat(
      "KV cache: %d blocks × %d tokens = %lld tokens; fits %d sequence%s of "
      "max-model-len %d (%s on %s)",
      num_blocks, block_size, static_cast<long long>(num_tokens), max_concurrent_full_len,
      max_concurrent_full_len == 1 ? "" : "s", max_model_len,
      format_bytes(static_cast<double>(total_bytes)).c_str(), device_name.c_str());
}

DeviceDefaults device_defaults(DeviceKind device) {
  if (device == DeviceKind::kCuda) return {256, 8192};
  return {64, 512};
}

Result<EngineConfig> resolve_engine_config(const EngineConfig& config, const ModelConfig& model,
                                           DeviceKind device) {
  EngineConfig c = config;
  c.device.device = device;
  SchedulerConfig& s = c.scheduler;
  const int64_t context = model.max_position_embeddings > 0 ? model.max_position_embeddings : 2048;
  if (s.max_model_len == 0) {
    s.max_model_len = static_cast<int32_t>(std::min<int64_t>(context, 1 << 30));
  } else if (s.max_model_len > context) {
    return invalid_argument(strformat(
        "--max-model-len %d is longer than the model's context (%lld tokens, "
        "max_position_embeddings); use --max-model-len <= %lld",
        s.max_model_len, static_cast<long long>(context), static_cast<long long>(context)));
  }
  if (s.max_model_len < 2)
    return invalid_argument(
        strformat("--max-model-len must be at least 2, got %d", s.max_model_len));

  const DeviceDefaults d = device_defaults(device);
  if (s.max_num_seqs == 0) s.max_num_seqs = d.max_num_seqs;
  if (s.max_num_batched_tokens == 0) {
    s.max_num_batched_tokens = std::max(d.max_num_batched_tokens, s.max_num_seqs);
    if (!s.enable_chunked_prefill)
      s.max_num_batched_tokens = std::max(s.max_num_batched_tokens, s.max_model_len);
  } else {
    if (s.max_num_batched_tokens < s.max_num_seqs)
      return invalid_argument(strformat(
          "--max-num-batched-tokens (%d) must be >= --max-num-seqs (%d): every running sequence "
          "needs one token per step",
          s.max_num_batched_tokens, s.max_num_seqs));
    if (!s.enable_chunked_prefill && s.max_num_batched_tokens < s.max_model_len)
      return invalid_argument(strformat(
          "without chunked prefill, --max-num-batched-tokens (%d) must be >= --max-model-len (%d) "
          "so that any prompt fits in one step",
          s.max_num_batched_tokens, s.max_model_len));
  }
  if (c.speculative.enabled()) c.speculative = resolve_speculative_config(c.speculative);
  if (c.served_model_name.empty()) c.served_model_name = model.name.empty() ? "model" : model.name;
  return c;
}

Result<KvPlan> plan_kv_cache(const EngineConfig& resolved, const KvPlanInput& in) {
  const SchedulerConfig& s = resolved.scheduler;
  const int32_t bs = resolved.cache.block_size;
  if (in.block_bytes <= 0) return internal_error("the model runner reports 0 bytes per KV block");
  const int64_t blocks_per_seq = (s.max_model_len + bs - 1) / bs;

  int64_t num_blocks;
  if (in.num_blocks_override > 0) {
    num_blocks = in.num_blocks_override;
  } else {
    num_blocks = in.budget_bytes / in.block_bytes;
    if (in.device == DeviceKind::kCpu && !in.budget_is_user_set)
      num_blocks = std::min(num_blocks, blocks_per_seq * s.max_num_seqs);
  }
  num_blocks = std::min<int64_t>(num_blocks, 1 << 30);
  if (num_blocks < blocks_per_seq) {
    const int64_t fits_tokens = num_blocks * bs;
    const std::string raise =
        in.num_blocks_override > 0 ? "raise num_gpu_blocks_override"
        : in.device == DeviceKind::kCuda && !in.budget_is_user_set
            ? "raise --gpu-memory-utilization"
            : "raise --kv-cache-memory (e.g. --kv-cache-memory " +
                  format_bytes(static_cast<double>(blocks_per_seq * in.block_bytes) * 1.1) + ")";
    if (fits_tokens < bs)
      return out_of_memory(strformat(
          "the KV cache has no room for even one block (%s per block of %d tokens, %s available on "
          "%s); %s",
          format_bytes(static_cast<double>(in.block_bytes)).c_str(), bs,
          format_bytes(static_cast<double>(in.budget_bytes)).c_str(), in.device_name.c_str(),
          raise.c_str()));
    return out_of_memory(strformat(
        "max-model-len %d needs %lld KV blocks (%s) for one sequence, but the KV cache holds %lld "
        "blocks (%s on %s); use --max-model-len <= %lld or %s",
        s.max_model_len, static_cast<long long>(blocks_per_seq),
        format_bytes(static_cast<double>(blocks_per_seq * in.block_bytes)).c_str(),
        static_cast<long long>(num_blocks),
        format_bytes(static_cast<double>(num_blocks * in.block_bytes)).c_str(),
        in.device_name.c_str(), static_cast<long long>(fits_tokens), raise.c_str()));
  }
  KvPlan p;
  p.num_blocks = static_cast<int32_t>(num_blocks);
  p.block_size = bs;
  p.num_tokens = num_blocks * bs;
  p.block_bytes = in.block_bytes;
  p.total_bytes = num_blocks * in.block_bytes;
  p.max_model_len = s.max_model_len;
  p.max_concurrent_full_len = static_cast<int32_t>(num_blocks / blocks_per_seq);
  p.device_name = in.device_name;
  return p;
}

}  // namespace lathe
