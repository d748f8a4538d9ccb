#include "engine/runtime/engine_core.h"

#include <algorithm>
#include <exception>

#include "engine/core/log.h"
#include "engine/core/status_guard.h"
#include "engine/core/strings.h"
#include "engine/runtime/model_input_builder.h"
#include "engine/runtime/prompt_logprobs.h"

namespace lathe {

namespace {

bool is_set(Clock::time_point t) {
  return t != Clock::time_point{};
}

// Prompt or recomputed tokens in a scheduled chunk; the rest is the one decode token (a generated
// token computed to sample the next) and the drafts after it.
int32_t prefill_tokens(const ScheduledSequence& s) {
  const int32_t verified_len = s.context_len() - s.num_draft_tokens;
  const bool decode = s.sample && verified_len - 1 >= s.num_prompt_tokens;
  return s.num_new_tokens - s.num_draft_tokens - (decode ? 1 : 0);
}

// The runner's output has the shape the step asked for: one token per sampled sequence, or with
// drafts 1..count tokens each.
Status check_output(const ModelInput& in, const ModelOutput& o) {
  const size_t n = in.sample_seqs.size();
  if (o.num_tokens.empty()) {
    if (o.tokens.size() != n)
      return internal_error(strformat("the runner returned %zu tokens for %zu sampled sequences",
                                      o.tokens.size(), n));
    return Status();
  }
  if (o.num_tokens.size() != n)
    return internal_error(strformat("the runner returned token counts for %zu sequences, not %zu",
                                    o.num_tokens.size(), n));
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (o.num_tokens[i] < 1 || o.num_tokens[i] > in.sample_count(i))
      return internal_error(
          strformat("the runner returned %d tokens for a sequence that samples %d", o.num_tokens[i],
                    in.sample_count(i)));
    total += static_cast<size_t>(o.num_tokens[i]);
  }
  if (total != o.tokens.size())
    return internal_error(strformat("the runner returned %zu tokens but counts that add up to %zu",
                                    o.tokens.size(), total));
  return Status();
}

}  // namespace

EngineCore::EngineCore(const EngineCoreConfig& config, ModelRunner* runner,
                       MetricsRegistry* metrics)
    : config_(config),
      runner_(runner),
      metrics_(metrics),
      kv_(config.kv),
      scheduler_(config.limits, &kv_),
      proposer_(config.proposer) {
  if (!proposer_) proposer_ = create_draft_proposer(config.speculative);
  if (config_.speculative.num_speculative_tokens <= 0) proposer_.reset();
}

void EngineCore::add_request(CoreRequest request) {
  auto seq = std::make_unique<Sequence>();
  seq->id = request.id;
  const int32_t num_prompt = static_cast<int32_t>(request.prompt.size());
  seq->tokens = std::move(request.prompt);
  seq->num_prompt_tokens = num_prompt;
  OutputProcessor output(config_.tokenizer, request.sampling, config_.eos_ids);
  auto active =
      std::make_unique<Active>(Active{std::move(request), std::move(output), {}, 0, num_prompt});
  if (active->req.sampling.constraint)
    active->constraint_state = active->req.sampling.constraint->start();
  active->timeline.arrival = active->req.arrival;
  const RequestId id = active->req.id;
  if (active->req.sampling.prompt_logprobs >= 0) needs_prompt_logprobs_.push_back(id);
  scheduler_.add(std::move(seq));
  active_[id] = std::move(active);
}

EngineLoad EngineCore::load() const {
  const KvUsage u = kv_.usage();
  EngineLoad l;
  l.num_running = scheduler_.num_running();
  l.num_waiting = scheduler_.num_waiting();
  l.kv_blocks_used = u.used;
  l.kv_blocks_cached = u.cached_free;
  l.kv_blocks_free = u.free;
  return l;
}

void EngineCore::publish_load() {
  MetricsUpdate u;
  u.time = Clock::now();
  u.load = load();
  metrics_->record(u);
}

void EngineCore::abort_request(RequestId id) {
  if (active_.count(id) == 0) return;
  MetricsUpdate u;
  u.time = Clock::now();
  std::vector<PendingEvent> events;
  StreamEvent e;
  finish(id, FinishReason::kAbort, std::move(e), "", "", u, events);
  u.load = load();
  metrics_->record(u);
  deliver(events);
}

void EngineCore::abort_all() {
  MetricsUpdate u;
  u.time = Clock::now();
  std::vector<PendingEvent> events;
  for (RequestId id : scheduler_.unfinished_ids())
    finish(id, FinishReason::kAbort, {}, "", "", u, events);
  u.load = load();
  metrics_->record(u);
  deliver(events);
}

SamplingRow EngineCore::sampling_row(const Active& a, std::span<const TokenId> drafts) const {
  const Sequence* seq = scheduler_.find(a.req.id);
  SamplingRowInput in;
  in.params = &a.req.sampling;
  in.seed = a.req.seed;
  in.tokens = seq->tokens;
  in.num_prompt_tokens = seq->num_prompt_tokens;
  in.stop_ids = a.output.end_token_ids();
  in.drafts = drafts;
  SamplingRow row = make_sampling_row(in);
  // Constrained sequences never carry drafts (propose_drafts), so the state is the row's.
  TokenConstraint* constraint = a.req.sampling.constraint.get();
  if (constraint == nullptr) return row;
  if (row.banned_tokens.empty()) {
    // The mask is looked up by the runner once the forward pass runs (model_io.h).
    row.constraint = constraint;
    row.constraint_state = a.constraint_state;
    row.constraint_end_ids = in.stop_ids;
    return row;
  }
  // min_tokens yields to the grammar: a complete output that cannot continue may end. Deciding
  // that needs the mask now.
  row.allowed = constraint->allowed(a.constraint_state, in.stop_ids);
  if (!mask_allows_other_than(*row.allowed, row.banned_tokens)) row.banned_tokens.clear();
  return row;
}

void EngineCore::propose_drafts() {
  const int32_t k = config_.speculative.num_speculative_tokens;
  const int64_t vocab = runner_->vocab_size();
  for (const Sequence* seq : scheduler_.running()) {
    if (seq->num_uncomputed_tokens() != 1) continue;  // not decoding (mid-prefill, recompute)
    // A step with d drafts yields up to d + 1 tokens: stay within max_tokens (which the engine has
    // already clamped to max-model-len).
    const Active& a = *active_.at(seq->id);
    // A constrained sequence's mask depends on each accepted token: no drafts.
    if (a.req.sampling.constraint) continue;
    const int32_t max_drafts =
        std::min(k, a.req.sampling.max_tokens - seq->num_output_tokens() - 1);
    token_buffer_.clear();
    if (max_drafts > 0) proposer_->propose(seq->tokens, max_drafts, &token_buffer_);
    size_t keep = std::min(token_buffer_.size(), static_cast<size_t>(std::max(max_drafts, 0)));
    for (size_t i = 0; i < keep; ++i)
      if (token_buffer_[i] < 0 || token_buffer_[i] >= vocab) keep = i;  // never past the vocabulary
    token_buffer_.resize(keep);
    scheduler_.set_draft_tokens(seq->id, token_buffer_);
  }
}

void EngineCore::finish(RequestId id, FinishReason reason, StreamEvent event,
                        std::string stop_reason, std::string error, MetricsUpdate& u,
                        std::vector<PendingEvent>& events) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  std::unique_ptr<Active> a = std::move(it->second);
  active_.erase(it);
  scheduler_.finish(id);  // frees the blocks now
  RequestTimeline& t = a->timeline;
  t.finished = u.time;

  const int32_t generated = a->output.num_output_tokens();
  FinishedRequestPoint f;
  f.id = id;
  f.client_id = a->req.client_id;
  f.reason = reason;
  f.prompt_tokens = a->num_prompt_tokens;
  f.generation_tokens = generated;
  f.cached_prompt_tokens = a->num_cached_tokens;
  f.queue_s = is_set(t.first_scheduled) ? seconds(t.first_scheduled - t.arrival) : 0.0;
  f.ttft_s = is_set(t.first_token) ? seconds(t.first_token - t.arrival) : -1.0;
  f.e2e_s = seconds(t.finished - t.arrival);
  if (generated > 1 && t.finished > t.first_token)
    f.decode_tokens_per_s = (generated - 1) / seconds(t.finished - t.first_token);
  u.finished.push_back(f);

  event.id = id;
  event.finished = true;
  event.finish_reason = reason;
  event.stop_reason = std::move(stop_reason);
  event.error = std::move(error);
  event.usage = {f.prompt_tokens, generated, a->num_cached_tokens};
  const StreamCallback* cb = &a->req.on_event;
  events.push_back(PendingEvent{cb, std::move(event), std::move(a)});
}

void EngineCore::fail_step(const SchedulerOutput& out, const Status& status, MetricsUpdate& u,
                           std::vector<PendingEvent>& events) {
  log_error("model step failed: " + status.message());
  for (const ScheduledSequence& s : out.seqs)
    finish(s.id, FinishReason::kError, {}, "", "the model runner failed: " + status.message(), u,
           events);
  // Blocks published for this step were never written: forget every cached block.
  kv_.reset_prefix_cache();
}

bool EngineCore::next_step_continues(const SchedulerOutput& out, const ModelInput& in) const {
  // With a proposer the next step may carry drafts, which a one-token-per-sequence prediction
  // cannot cover: a discarded lookahead costs a whole decode step of device time.
  if (proposer_ || scheduler_.num_waiting() > 0 || in.num_tokens() != in.num_seqs() ||
      in.sample_seqs.size() != out.seqs.size())
    return false;
  for (const ScheduledSequence& s : out.seqs) {
    const Active& a = *active_.at(s.id);
    const int32_t after = a.output.num_output_tokens() + 1;  // outputs once this step's is added
    const SamplingParams& p = a.req.sampling;
    // A constrained row continues too: its next mask, which follows from the token this step
    // samples, is late-bound (model_io.h): the runner samples the next step with the next input's.
    if (after >= p.max_tokens || after == p.min_tokens) return false;
  }
  return true;
}

void EngineCore::compute_prompt_logprobs_pending(MetricsUpdate& u,
                                                 std::vector<PendingEvent>& events) {
  std::vector<RequestId> ids;
  ids.swap(needs_prompt_logprobs_);
  for (const RequestId id : ids) {
    auto it = active_.find(id);
    const Sequence* seq = scheduler_.find(id);
    if (it == active_.end() || seq == nullptr) continue;  // aborted meanwhile
    Active& a = *it->second;
    Result<std::vector<SampledToken>> lp = compute_prompt_logprobs(
        *runner_, kv_,
        std::span<const TokenId>(seq->tokens.data(), static_cast<size_t>(seq->num_prompt_tokens)),
        a.req.sampling.prompt_logprobs);
    if (lp.is_ok()) {
      a.prompt_logprobs = std::move(lp).value();
    } else {
      finish(id, FinishReason::kError, {}, "", lp.status().message(), u, events);
    }
  }
}

bool EngineCore::step() {
  if (proposer_) propose_drafts();
  MetricsUpdate u;
  u.time = Clock::now();
  std::vector<PendingEvent> events;
  if (!needs_prompt_logprobs_.empty()) compute_prompt_logprobs_pending(u, events);
  SchedulerOutput out = scheduler_.schedule();
  for (const FailedSequence& f : out.failed)
    finish(
        f.id, FinishReason::kError, {}, "",
        strformat("the request needs %d tokens of KV cache, more than the whole cache holds (%d)",
                  f.num_tokens, kv_.usage().total * kv_.block_size()),
        u, events);
  if (out.empty()) {
    u.load = load();
    metrics_->record(u);
    deliver(events);
    return false;
  }
  for (const ScheduledSequence& s : out.seqs) {
    Active& a = *active_.at(s.id);
    if (!is_set(a.timeline.first_scheduled)) a.timeline.first_scheduled = u.time;
  }
  for (const AdmittedSequence& adm : out.admitted) {
    u.prefix_cache_queries += adm.num_tokens;
    u.prefix_cache_hits += adm.num_cached_tokens;
    if (adm.first_admission) active_.at(adm.id)->num_cached_tokens = adm.num_cached_tokens;
  }

  ModelInput in = build_model_input(out, kv_.block_size());
  in.sampling.reserve(static_cast<size_t>(in.num_sample_rows()));
  for (int32_t idx : in.sample_seqs) {
    const ScheduledSequence& s = out.seqs[static_cast<size_t>(idx)];
    const Active& a = *active_.at(s.id);
    if (s.num_draft_tokens == 0) {
      in.sampling.push_back(sampling_row(a));
      continue;
    }
    // Row j of a sequence with drafts samples the token after its first j drafts.
    const std::span<const TokenId> drafts(
        s.token_ids.data() + s.token_ids.size() - static_cast<size_t>(s.num_draft_tokens),
        static_cast<size_t>(s.num_draft_tokens));
    for (int32_t j = 0; j <= s.num_draft_tokens; ++j)
      in.sampling.push_back(sampling_row(a, drafts.first(static_cast<size_t>(j))));
  }
  in.next_step_continues = next_step_continues(out, in);
  // A runner's exception ends this step's requests with an error, as an error Status does.
  Result<ModelOutput> result =
      call_catching("the model step", [&]() { return runner_->execute(in); });
  if (result.is_ok()) {
    const Status shape = check_output(in, *result);
    if (!shape.is_ok()) result = shape;
  }

  u.time = Clock::now();
  u.is_step = true;
  u.num_scheduled_seqs = static_cast<int32_t>(out.seqs.size());
  u.num_batched_tokens = out.num_batched_tokens;
  u.num_preemptions = static_cast<int32_t>(out.preempted.size());
  for (const ScheduledSequence& s : out.seqs) u.num_prefill_tokens += prefill_tokens(s);

  if (!result.is_ok()) {
    fail_step(out, result.status(), u, events);
  } else {
    const int64_t vocab = runner_->vocab_size();
    size_t next = 0;
    for (size_t k = 0; k < in.sample_seqs.size(); ++k) {
      const ScheduledSequence& s = out.seqs[static_cast<size_t>(in.sample_seqs[k])];
      const size_t n = static_cast<size_t>(result->num_tokens_of(k));
      if (s.num_draft_tokens > 0) {
        ++u.num_spec_drafts;
        u.num_draft_tokens += s.num_draft_tokens;
        u.num_accepted_tokens += static_cast<int32_t>(n) - 1;
      }
      take_tokens(s.id, std::span<SampledToken>(result->tokens.data() + next, n), vocab, u, events);
      next += n;
    }
  }
  u.load = load();
  metrics_->record(u);
  deliver(events);
  return true;
}

void EngineCore::take_tokens(RequestId id, std::span<SampledToken> tokens, int64_t vocab,
                             MetricsUpdate& u, std::vector<PendingEvent>& events) {
  for (const SampledToken& tok : tokens) {
    if (tok.token < 0 || tok.token >= vocab) {
      finish(id, FinishReason::kError, {}, "",
             strformat("the model runner produced token id %d, outside the vocabulary", tok.token),
             u, events);
      return;
    }
  }
  Active& a = *active_.at(id);
  RequestTimeline& t = a.timeline;
  // One inter-token gap per step, as vLLM counts it: tokens verified together arrive together.
  if (t.token_times.empty()) {
    t.first_token = u.time;
    u.first_tokens.push_back({id, seconds(u.time - t.arrival),
                              seconds(t.first_scheduled - t.arrival), a.num_prompt_tokens});
  } else {
    u.itl_s.push_back(seconds(u.time - t.token_times.back()));
  }
  for (SampledToken& tok : tokens) {
    if (a.req.sampling.constraint)
      a.constraint_state = a.req.sampling.constraint->advance(a.constraint_state, tok.token);
    t.token_times.push_back(u.time);
    ++u.num_generated_tokens;
    OutputDelta d = a.output.add_token(tok.token);
    StreamEvent e;
    e.id = id;
    e.text = std::move(d.text);
    e.token_ids = {tok.token};
    if (a.req.sampling.logprobs >= 0) e.logprobs.push_back(std::move(tok));
    if (!a.prompt_logprobs.empty()) e.prompt_logprobs = std::move(a.prompt_logprobs);
    if (d.finished) {
      // Tokens after the one that ends the request are dropped: never streamed nor counted.
      finish(id, d.reason, std::move(e), std::move(d.stop_reason), "", u, events);
      return;
    }
    e.usage = {a.num_prompt_tokens, a.output.num_output_tokens(), a.num_cached_tokens};
    events.push_back(PendingEvent{&a.req.on_event, std::move(e), nullptr});
  }
  if (tokens.size() == 1) {
    scheduler_.append_token(id, tokens[0].token);
  } else {
    token_buffer_.clear();
    for (const SampledToken& tok : tokens) token_buffer_.push_back(tok.token);
    scheduler_.append_tokens(id, token_buffer_);
  }
}

void EngineCore::deliver(std::vector<PendingEvent>& events) {
  for (PendingEvent& p : events) {
    if (!*p.callback) continue;
    if (p.owner) p.event.timeline = &p.owner->timeline;
    try {
      (*p.callback)(p.event);
    } catch (const std::exception& ex) {
      log_error(std::string("a stream callback threw: ") + ex.what());
    } catch (...) {
      log_error("a stream callback threw");
    }
  }
  events.clear();
}

}  // namespace lathe
