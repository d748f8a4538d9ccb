// What Engine::create decides before the engine runs: the config's defaults resolved for a model
// and a device, and the KV-cache plan. Pure functions of their inputs (no I/O), so the GUI's
// memory planner and tests can call them too.
#pragma once

#include "engine/core/status.h"
#include "engine/model/model_config.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/engine_config.h"

namespace lathe {

// Device defaults for the "0 = default" limits.
struct DeviceDefaults {
  int32_t max_num_seqs;
  int32_t max_num_batched_tokens;
};
DeviceDefaults device_defaults(DeviceKind device);  // GPU 256 / 8192, CPU 64 / 512

// Fills max_model_len (the model's context), max_num_seqs and max_num_batched_tokens (device
// defaults; the token budget is raised to hold max_num_seqs decodes, and to max_model_len when
// chunked prefill is off), served_model_name, device, and the speculative config's n-gram
// lengths. Errors say which flag to change.
Result<EngineConfig> resolve_engine_config(const EngineConfig& config, const ModelConfig& model,
                                           DeviceKind device);

// How many KV blocks to allocate. budget_bytes: the memory the cache may use (CPU:
// --kv-cache-memory or its default, capped at what max_num_seqs sequences of max_model_len need;
// GPU: what the runner measured free after weights and activations, or --kv-cache-memory when
// that is less). Fails, saying what to change, when one sequence of max_model_len does not fit.
struct KvPlanInput {
  int64_t block_bytes = 0;  // one block of block_size tokens, K and V, all layers
  int64_t budget_bytes = 0;
  bool budget_is_user_set = false;  // the budget is --kv-cache-memory's (CPU: not capped)
  int32_t num_blocks_override = 0;  // > 0: exactly this many blocks
  DeviceKind device = DeviceKind::kCpu;
  std::string device_name;
};
Result<KvPlan> plan_kv_cache(const EngineConfig& resolved, const KvPlanInput& input);

}  // namespace lathe
