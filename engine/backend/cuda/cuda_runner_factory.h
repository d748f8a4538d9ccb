// Creates the CUDA model runner. Plain C++: the engine core includes this header from code that is
// built without CUDA headers (and only calls it when LATHE_WITH_CUDA is defined).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_switches.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/parallel.h"

namespace lathe {

class DeviceContext;
struct LoadedModel;

// Sizes of 0 select the GPU defaults: 256 sequences, 8192 tokens, the model's context, blocks
// of 16.
struct CudaRunnerOptions {
  int32_t device = 0;          // CUDA device ordinal
  DType dtype = DType::kBF16;  // activations, weights and KV cache: bf16 or f16
  bool enforce_eager = false;  // no CUDA graphs (every step launched kernel by kernel)
  int32_t max_num_seqs = 256;  // sequences per step: batch slots, graph buckets, sampler rows
  int32_t max_num_batched_tokens = 8192;  // tokens per step: activation buffers, the profiling step
  int32_t max_model_len = 0;  // tokens per sequence; 0 = the model's max_position_embeddings
  int32_t block_size = 16;    // KV tokens per block the engine will use (may differ at allocation)
  double gpu_memory_utilization = 0.90;  // share of device memory Lathe may use, (0, 1]
  uint64_t dummy_seed = 0;  // seed of ModelFormat::kDummy weights (same values as the CPU's)
  // Lookahead (ModelInput::next_step_continues): decode steps of at most this many sequences start
  // their predicted successor before their own tokens are read back; 0 turns it off. Small batches
  // only: there the host's turn between steps is a visible share of the step, and a discarded
  // step (a sequence ending on EOS, an arrival) costs least.
  int32_t lookahead_max_seqs = 1;
  // Draft tokens a sequence may carry into one step to be verified (speculative decoding, k): the
  // sampler and logits buffers hold max_num_seqs * (1 + k) rows, and decode steps whose sequences
  // each carry 1 + k tokens get CUDA graphs of their own. 0: one sampled token per sequence.
  int32_t num_speculative_tokens = 0;
  // Slots of the device-resident mask cache (constrained decoding, step_executor.h), each
  // ceil(vocab / 32) words: 0 is four times the sampled rows, 64 to 1024 (19 MB at 152k tokens,
  // the 1024 masks one grammar caches at most).
  int32_t mask_cache_slots = 0;
  // A/B switches (cuda_switches.h); the command line fills them from the environment.
  CudaSwitches switches;
  // The device state to share (device_context.h): another runner's device_context() runs this one
  // on the same stream and plans its memory with it; null: a context of its own on `device`.
  std::shared_ptr<DeviceContext> context;
  ParallelConfig parallel;  // world size 1 only today
};

// Loads `model` onto the GPU (weights once, dequantizing GGUF types), allocates every activation
// buffer and workspace for the options' limits, runs one profiling step of max_num_batched_tokens
// to measure the activation peak, and sets memory_info().kv_budget_bytes to what remains under
// gpu_memory_utilization. Fails with an actionable message when even one max_model_len sequence
// does not fit, e.g. "max-model-len 131072 needs 16.0 GiB of KV cache for one sequence; 5.2 GiB are
// free after weights and activations; use --max-model-len <= 41000 or raise
// --gpu-memory-utilization". allocate_kv_cache() then allocates the cache and captures the decode
// CUDA graphs (unless enforce_eager). The runner does not keep references into `model`.
Result<std::unique_ptr<ModelRunner>> create_cuda_model_runner(const LoadedModel& model,
                                                              const CudaRunnerOptions& options);

// Whether a usable CUDA device exists (driver present, at least one device of compute capability
// 8.0 or newer). When not, `why` (if given) says why, e.g. "no CUDA driver
// (cudaErrorInsufficientDriver)".
bool cuda_device_available(std::string* why = nullptr);
// The same for one device ordinal (it exists and has compute capability 8.0 or newer).
bool cuda_device_usable(int32_t device, std::string* why = nullptr);

// What the GUI's memory plan needs to know about a device.
struct CudaDeviceProperties {
  std::string name;         // "NVIDIA H200"
  int64_t total_bytes = 0;  // device memory
  int32_t major = 0;        // compute capability
  int32_t minor = 0;
  int32_t multiprocessors = 0;
};
// Fills `out` for a usable device (cuda_device_usable's checks, one property query); false with
// `why` otherwise.
bool cuda_device_properties(int32_t device, CudaDeviceProperties* out, std::string* why = nullptr);

// "NVIDIA H200 (139.8 GiB, compute 9.0, 132 SMs, driver 13.0)" for `lathe inspect` and load logs;
// the error text when the device is not usable.
std::string cuda_device_description(int32_t device = 0);

}  // namespace lathe
