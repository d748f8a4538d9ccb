// Plain configuration structs for an engine, with defaults and units. Front-ends (CLI flags, HTTP
// server, Lathe Studio settings) fill them; validate_engine_config() checks them and says what to
// change. No I/O happens here.
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/status.h"
#include "engine/model/model_loader.h"

namespace lathe {

enum class DeviceKind { kAuto, kCpu, kCuda };
const char* device_kind_name(DeviceKind d);  // "auto", "cpu", "cuda"
bool parse_device_kind(const std::string& s, DeviceKind* out);

struct DeviceConfig {
  DeviceKind device =
      DeviceKind::kAuto;       // auto: CUDA when a usable GPU exists, else CPU (with a notice)
  std::string dtype = "auto";  // activations/weights on the GPU: auto (bf16), bf16, f16
  int32_t num_threads = 0;     // CPU backend threads; 0 = all hardware threads
  int32_t cuda_device = 0;     // GPU ordinal
  bool enforce_eager = false;  // CUDA: no CUDA graphs
};

struct CacheConfig {
  int32_t block_size = 16;  // tokens per KV block
  // KV budget in bytes; 0 = auto (CPU: min(1 GiB, 25% of RAM); GPU: what gpu_memory_utilization
  // leaves after weights and activations, which also caps a value given here).
  int64_t kv_cache_memory_bytes = 0;
  double gpu_memory_utilization = 0.90;  // CUDA: share of device memory Lathe may use, (0, 1]
  bool enable_prefix_caching = true;
  int32_t num_gpu_blocks_override = 0;  // > 0: use exactly this many blocks (tests)
};

enum class SchedulingPolicy { kContinuous, kStatic };

struct SchedulerConfig {
  int32_t max_num_seqs =
      0;  // sequences per step (batch slots); 0 = device default (GPU 256, CPU 64)
  int32_t max_num_batched_tokens =
      0;  // tokens per step (prefill chunks + decodes); 0 = device default (GPU 8192, CPU 512)
  int32_t max_model_len = 0;  // prompt + output tokens per sequence; 0 = the model's context
  SchedulingPolicy policy = SchedulingPolicy::kContinuous;
  bool enable_chunked_prefill = true;   // split prompts longer than the step budget
  int32_t max_waiting_requests = 4096;  // submit() fails with kResourceExhausted beyond this
};

// Speculative decoding (vLLM's --speculative-config). With method ngram (prompt lookup), each
// decoding sequence proposes up to num_speculative_tokens drafts: the tokens that followed the most
// recent earlier occurrence of its last n tokens in prompt ++ output, n from prompt_lookup_max down
// to prompt_lookup_min; one step verifies them. Outputs are those of a run without speculation.
enum class SpeculativeMethod { kNone, kNgram };
const char* speculative_method_name(SpeculativeMethod m);  // "none", "ngram"
bool parse_speculative_method(const std::string& s, SpeculativeMethod* out);

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_speculative_tokens = 0;  // drafts per sequence per step (k); >= 1 with a method
  // n-gram lengths tried, longest first. 0 = unset, resolved as vLLM does: both unset -> 5 and 5;
  // one unset -> the other's value.
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;

  bool enabled() const { return method != SpeculativeMethod::kNone; }
};

struct EngineConfig {
  std::string model_path;  // GGUF file, HF folder, or config.json folder with load_format dummy
  LoadOptions load;
  DeviceConfig device;
  CacheConfig cache;
  SchedulerConfig scheduler;
  SpeculativeConfig speculative;
  std::string served_model_name;  // name reported to API clients; default: the model's name
};

Status validate_engine_config(const EngineConfig& config);
// The speculative part of validate_engine_config(); errors name the field of --speculative-config.
Status validate_speculative_config(const SpeculativeConfig& config);

// The resolved n-gram lengths (the 0 = unset rules above).
SpeculativeConfig resolve_speculative_config(const SpeculativeConfig& config);

}  // namespace lathe
