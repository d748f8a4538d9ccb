#include "engine/runtime/engine_config.h"

#include "engine/core/strings.h"

namespace lathe {

const char* device_kind_name(DeviceKind d) {
  switch (d) {
    case DeviceKind::kAuto:
      return "auto";
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
  }
  return "auto";
}

bool parse_device_kind(const std::string& s, DeviceKind* out) {
  if (s == "auto")
    *out = DeviceKind::kAuto;
  else if (s == "cpu")
    *out = DeviceKind::kCpu;
  else if (s == "cuda" || s == "gpu")
    *out = DeviceKind::kCuda;
  else
    return false;
  return true;
}

const char* speculative_method_name(SpeculativeMethod m) {
  return m == SpeculativeMethod::kNgram ? "ngram" : "none";
}

bool parse_speculative_method(const std::string& s, SpeculativeMethod* out) {
  if (s == "none" || s.empty())
    *out = SpeculativeMethod::kNone;
  else if (s == "ngram" || s == "[ngram]")
    *out = SpeculativeMethod::kNgram;
  else
    return false;
  return true;
}

namespace {
// Bounds that keep a step's drafts and a lookup's cost small.
constexpr int32_t kMaxSpeculativeTokens = 16;
constexpr int32_t kMaxPromptLookup = 64;
}  // namespace

Status validate_speculative_config(const SpeculativeConfig& c) {
  if (c.num_speculative_tokens < 0)
    return invalid_argument(
        strformat("speculative config: num_speculative_tokens must be >= 0, got %d",
                  c.num_speculative_tokens));
  if (c.prompt_lookup_min < 0 || c.prompt_lookup_max < 0)
    return invalid_argument(
        strformat("speculative config: prompt_lookup_min and prompt_lookup_max must be >= 1 (or "
                  "left out), got %d and %d",
                  c.prompt_lookup_min, c.prompt_lookup_max));
  if (!c.enabled()) {
    if (c.num_speculative_tokens > 0)
      return invalid_argument(strformat(
          "speculative config: num_speculative_tokens is %d but no method is set; add \"method\": "
          "\"ngram\"",
          c.num_speculative_tokens));
    return Status();
  }
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
    return invalid_argument(strformat(
        "speculative config: method %s needs num_speculative_tokens in [1, %d], got %d",
        speculative_method_name(c.method), kMaxSpeculativeTokens, c.num_speculative_tokens));
  const SpeculativeConfig r = resolve_speculative_config(c);
  if (r.prompt_lookup_max > kMaxPromptLookup)
    return invalid_argument(strformat("speculative config: prompt_lookup_max must be <= %d, got %d",
                                      kMaxPromptLookup, r.prompt_lookup_max));
  if (r.prompt_lookup_min > r.prompt_lookup_max)
    return invalid_argument(
        strformat("speculative config: prompt_lookup_min (%d) must be <= prompt_lookup_max (%d)",
                  r.prompt_lookup_min, r.prompt_lookup_max));
  return Status();
}

SpeculativeConfig resolve_speculative_config(const SpeculativeConfig& c) {
  SpeculativeConfig r = c;
  if (r.prompt_lookup_min == 0 && r.prompt_lookup_max == 0) {
    r.prompt_lookup_min = r.prompt_lookup_max = 5;
  } else if (r.prompt_lookup_min == 0) {
    r.prompt_lookup_min = r.prompt_lookup_max;
  } else if (r.prompt_lookup_max == 0) {
    r.prompt_lookup_max = r.prompt_lookup_min;
  }
  return r;
}

Status validate_engine_config(const EngineConfig& c) {
  if (c.device.dtype != "auto" && !parse_float_dtype(c.device.dtype))
    return invalid_argument("--dtype must be auto, bf16 or f16, got '" + c.device.dtype + "'");
  if (c.device.num_threads < 0) return invalid_argument("--threads must be >= 0");
  const int32_t bs = c.cache.block_size;
  if (bs != 8 && bs != 16 && bs != 32)
    return invalid_argument(strformat("--block-size must be 8, 16 or 32, got %d", bs));
  if (c.cache.kv_cache_memory_bytes < 0)
    return invalid_argument("--kv-cache-memory must be positive");
  if (!(c.cache.gpu_memory_utilization > 0.0 && c.cache.gpu_memory_utilization <= 1.0))
    return invalid_argument(strformat("--gpu-memory-utilization must be in (0, 1], got %g",
                                      c.cache.gpu_memory_utilization));
  if (c.scheduler.max_num_seqs < 0 || c.scheduler.max_num_seqs > 4096)
    return invalid_argument(
        strformat("--max-num-seqs must be in [1, 4096], got %d", c.scheduler.max_num_seqs));
  if (c.scheduler.max_num_batched_tokens < 0 || c.scheduler.max_num_batched_tokens > (1 << 20))
    return invalid_argument(strformat("--max-num-batched-tokens must be in [1, 1048576], got %d",
                                      c.scheduler.max_num_batched_tokens));
  if (c.scheduler.max_model_len < 0)
    return invalid_argument(
        strformat("--max-model-len must be > 0, got %d", c.scheduler.max_model_len));
  if (c.scheduler.max_waiting_requests <= 0)
    return invalid_argument("max_waiting_requests must be > 0");
  return validate_speculative_config(c.speculative);
}

}  // namespace lathe
