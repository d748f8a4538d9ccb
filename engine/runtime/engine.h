// The public face of the inference engine: load a model onto a device, submit requests from any
// thread, stream their tokens, abort them, read metrics. Everything behind it (scheduler, KV cache,
// model runner) runs on the engine's own thread.
//
//   auto engine = Engine::create(config);            // loads the model and plans the KV cache
//   auto id = engine.value()->submit(spec, on_event); // on_event runs on the engine thread
//   engine.value()->abort(id.value());                // from any thread, at any time
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/core/status.h"
#include "engine/model/loaded_model.h"
#include "engine/runtime/engine_config.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/request.h"

namespace lathe {

class MetricsRegistry;
struct MetricsSnapshot;

// The KV-cache plan decided at load, reported to users.
struct KvPlan {
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int64_t num_tokens = 0;  // num_blocks * block_size
  int64_t block_bytes = 0;
  int64_t total_bytes = 0;
  int32_t max_model_len = 0;
  int32_t max_concurrent_full_len = 0;  // sequences of max_model_len that fit at once
  std::string device_name;
  // "KV cache: N blocks × 16 tokens = M tokens; fits K sequences of max-model-len L (size, device)"
  std::string summary() const;
};

// Load progress: fraction in [0, 1] and a stage name. Return false to cancel the load.
using LoadProgressCallback = std::function<bool(float fraction, const std::string& stage)>;

class Engine {
 public:
  // Loads the model named by config.model_path and starts the engine thread. Errors: bad model
  // files, a device that is not usable, a config that does not fit in memory (with what to change).
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config,
                                                LoadProgressCallback progress = nullptr);
  // Same, with a model already loaded by the caller (the engine takes it over).
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config, LoadedModel model,
                                                LoadProgressCallback progress = nullptr);
  // Same, with a runner the caller made (tests with a fake runner, custom backends). The runner
  // must not refer to `model` (it is moved). config.device.device picks the defaults (auto: CPU).
  static Result<std::unique_ptr<Engine>> create_with_runner(const EngineConfig& config,
                                                            LoadedModel model,
                                                            std::unique_ptr<ModelRunner> runner);
  virtual ~Engine() = default;

  // Validates and enqueues a request. Fails at once (nothing is enqueued, on_event is never called)
  // when the prompt cannot fit (longer than max-model-len or than the whole KV cache), a parameter
  // is out of range, or the waiting queue is full (kResourceExhausted). Tokenization runs on the
  // caller's thread. max_tokens is clamped to max-model-len minus the prompt; an unseeded request
  // gets a random seed. Otherwise on_event is called for every token and exactly once with
  // finished = true, on the engine thread.
  virtual Result<RequestId> submit(const RequestSpec& spec, StreamCallback on_event) = 0;

  // Submits several requests at once, all or none (the first invalid one fails the call, with its
  // index in the message): the engine sees them arrive together, as an offline benchmark (or a
  // static batch) needs. on_events[i] belongs to specs[i]. The default implementation (for test
  // doubles) calls submit() one by one.
  virtual Result<std::vector<RequestId>> submit_batch(const std::vector<RequestSpec>& specs,
                                                      std::vector<StreamCallback> on_events);

  // Ends a request with reason abort and frees its KV blocks at the next step boundary (before its
  // final event is delivered); a queued request is removed. Unknown or finished ids are ignored.
  virtual void abort(RequestId id) = 0;

  // Aborts everything in flight (each stream ends with reason abort) and stops the engine thread.
  // Called by the destructor; idempotent.
  virtual void shutdown() = 0;

  // Number of requests accepted whose final event has not been delivered yet (it drops after the
  // final callback returns, so 0 means no callback is running or will run).
  virtual int num_unfinished_requests() const = 0;

  virtual const LoadedModel& model() const = 0;
  // With defaults resolved: max_model_len, max_num_seqs, max_num_batched_tokens, served_model_name,
  // and device.device (kCpu or kCuda, never kAuto).
  virtual const EngineConfig& config() const = 0;
  virtual const KvPlan& kv_plan() const = 0;
  // Snapshots and Prometheus text (metrics.h); readable from any thread.
  virtual const MetricsRegistry& metrics() const = 0;

  // Tokenization with the model's tokenizer and chat template (for /tokenize and the UI).
  virtual Result<std::vector<TokenId>> tokenize(const RequestSpec& spec) const = 0;
};

}  // namespace lathe
