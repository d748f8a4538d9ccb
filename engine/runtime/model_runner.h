// The backend interface: a model loaded on a device (CPU reference or CUDA), with its paged KV
// cache, that executes one engine step at a time. One thread (the engine core's) drives a runner;
// implementations need not be thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/runtime/model_io.h"

namespace lathe {

class DeviceContext;
struct LoadedModel;

// How much memory the KV cache may take, and what is known about the device.
struct DeviceMemoryInfo {
  std::string device_name;       // "CPU (2 threads)", "NVIDIA H200 (139.8 GiB)"
  int64_t total_bytes = 0;       // device memory (RAM for the CPU)
  int64_t weight_bytes = 0;      // taken by weights on the device
  int64_t activation_bytes = 0;  // measured or planned peak of activations and workspaces
  int64_t kv_budget_bytes = 0;   // what the KV cache may use
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const DeviceMemoryInfo& memory_info() const = 0;
  // Bytes of one KV block (K and V, all layers) of `block_size` tokens on this device.
  virtual int64_t kv_block_bytes(int32_t block_size) const = 0;
  // Allocates the paged KV cache; must be called once before execute().
  virtual Status allocate_kv_cache(int32_t num_blocks, int32_t block_size) = 0;

  // Runs the forward pass for `input`, samples one token per sampled row, and returns one token
  // per sampled sequence, or with drafts the accepted ones and one more (accept_draft_tokens(),
  // draft_acceptance.h, shared by every runner).
  virtual Result<ModelOutput> execute(const ModelInput& input) = 0;

  // Runs the forward pass and returns the raw logits (float32) of the sampled rows, row-major
  // [num_sample_rows(), vocab_size] (sample_seqs.size() rows without drafts). For tests and
  // evaluation: a sequence whose sample count is its query length gives the logits of every
  // position of the step (engine/eval/evaluate.h runs windows that way, in chunks of at most the
  // runner's logits rows: max_num_seqs on CUDA).
  virtual Result<std::vector<float>> compute_logits(const ModelInput& input) = 0;

  virtual int64_t vocab_size() const = 0;

  // The device state this runner shares with others created on it (device_context.h); null for
  // backends without one (the CPU).
  virtual std::shared_ptr<DeviceContext> device_context() const { return nullptr; }

  // Whether execute() follows the multi-token contract (ModelInput::sample_counts, model_io.h):
  // samples every sampled row and applies accept_draft_tokens(). The engine refuses a speculative
  // config on a runner that does not.
  virtual bool verifies_draft_tokens() const { return false; }
};

}  // namespace lathe
