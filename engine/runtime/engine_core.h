// The engine core: one step at a time, on the engine's own thread (never thread-safe by itself;
// Engine feeds it from its inbox). A step is
//   [propose drafts] -> schedule -> build ModelInput -> runner.execute -> append sampled tokens ->
//   detokenize, check EOS / stop strings / length -> free finished requests -> record metrics ->
//   stream events.
// With speculative decoding, each decoding sequence first gets up to k drafts from the proposer
// (draft_proposer.h), clamped so that they cannot take it past max_tokens; the runner returns the
// accepted drafts and one token more per sequence, which are streamed one event per token until
// one of them ends the request (the rest are dropped and never counted).
// Events are delivered after the step's metrics are recorded, so a callback that reads the metrics
// sees the blocks of a finished request already freed.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv/kv_cache_manager.h"
#include "engine/runtime/draft_proposer.h"
#include "engine/runtime/metrics.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/output_processor.h"
#include "engine/runtime/request.h"
#include "engine/sched/scheduler.h"

namespace lathe {

// A validated request, ready for the core (Engine::submit builds it).
struct CoreRequest {
  RequestId id = 0;
  std::string client_id;
  std::vector<TokenId> prompt;  // non-empty, ids in the vocabulary, shorter than max-model-len
  SamplingParams sampling;      // validated; max_tokens clamped to max-model-len - prompt
  uint64_t seed = 0;            // the request's seed (sampling.seed or a random one)
  StreamCallback on_event;
  Clock::time_point arrival;
};

struct EngineCoreConfig {
  SchedulerLimits limits;
  KvCacheConfig kv;
  std::shared_ptr<const Tokenizer> tokenizer;  // null: stream token ids only
  std::vector<TokenId> eos_ids;
  SpeculativeConfig speculative;  // resolved and validated
  // Overrides the proposer `speculative` names (tests); needs speculative.num_speculative_tokens.
  std::shared_ptr<DraftProposer> proposer;
};

class EngineCore {
 public:
  // `runner` (with its KV cache allocated for config.kv) and `metrics` must outlive the core.
  EngineCore(const EngineCoreConfig& config, ModelRunner* runner, MetricsRegistry* metrics);

  void add_request(CoreRequest request);
  // Ends a waiting or running request with reason abort: its blocks are freed before its final
  // event is delivered. Unknown ids are ignored.
  void abort_request(RequestId id);
  // Aborts every request (shutdown).
  void abort_all();

  // Runs one step when there is work; returns false when nothing was scheduled.
  bool step();
  // Records the current gauges (running, waiting, KV blocks) in the metrics.
  void publish_load();

  bool has_unfinished() const { return scheduler_.has_unfinished(); }
  int32_t num_running() const { return scheduler_.num_running(); }

 private:
  struct Active {
    CoreRequest req;  // req.prompt moved into the scheduler's Sequence (its only copy)
    OutputProcessor output;
    RequestTimeline timeline;
    int32_t num_cached_tokens = 0;
    int32_t num_prompt_tokens = 0;
    int32_t constraint_state = 0;  // with req.sampling.constraint: the state after the output
    std::vector<SampledToken> prompt_logprobs;  // computed before the first step, sent with token 1
  };
  // `callback` points into an Active that outlives delivery: one still in active_, or `owner`
  // (finish() moves a request out of active_ into its final event), so no std::function is copied
  // per token.
  struct PendingEvent {
    const StreamCallback* callback;
    StreamEvent event;
    std::unique_ptr<Active> owner;  // kept alive until a finished event is delivered
  };

  EngineLoad load() const;
  // The sampling row of `a`'s next token, or with drafts of the token after them.
  SamplingRow sampling_row(const Active& a, std::span<const TokenId> drafts = {}) const;
  // Asks the proposer for every decoding sequence's drafts (speculative decoding).
  void propose_drafts();
  // Streams the tokens one sampled sequence produced this step, in order, until one ends it.
  void take_tokens(RequestId id, std::span<SampledToken> tokens, int64_t vocab_size,
                   MetricsUpdate& update, std::vector<PendingEvent>& events);
  // ModelInput::next_step_continues for the step `out` flattened into `in`.
  bool next_step_continues(const SchedulerOutput& out, const ModelInput& in) const;
  // Removes a request from the scheduler (freeing its blocks) and queues its final event.
  // `event` carries the last token's text and ids, if any.
  void finish(RequestId id, FinishReason reason, StreamEvent event, std::string stop_reason,
              std::string error, MetricsUpdate& update, std::vector<PendingEvent>& events);
  void fail_step(const SchedulerOutput& out, const Status& status, MetricsUpdate& update,
                 std::vector<PendingEvent>& events);
  static void deliver(std::vector<PendingEvent>& events);
  // Computes prompt logprobs for requests added since the last step (prompt_logprobs.h); a
  // failure ends that request with an error.
  void compute_prompt_logprobs_pending(MetricsUpdate& update, std::vector<PendingEvent>& events);

  EngineCoreConfig config_;
  ModelRunner* runner_;
  MetricsRegistry* metrics_;
  KvCacheManager kv_;
  Scheduler scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<Active>> active_;
  std::shared_ptr<DraftProposer> proposer_;       // null: no speculative decoding
  std::vector<TokenId> token_buffer_;             // reused: drafts, then a step's accepted tokens
  std::vector<RequestId> needs_prompt_logprobs_;  // added since the last step, asking for them
};

}  // namespace lathe
