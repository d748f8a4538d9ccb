// Engine: Engine::create (load, pick the device, plan the KV cache) and the thread-safe front of
// the engine core: submit() validates on the caller's thread and hands the request to the engine
// thread through an inbox; the engine thread drains the inbox, steps the core while there is work,
// and sleeps on a condition variable when there is none.
#include "engine/runtime/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/engine_core.h"
#include "engine/runtime/engine_setup.h"
#include "engine/runtime/metrics.h"
#include "engine/runtime/runner_factory.h"
#include "engine/tokenizer/chat_template.h"

namespace lathe {

namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineConfig config, std::unique_ptr<LoadedModel> model,
             std::unique_ptr<ModelRunner> runner, KvPlan plan)
      : config_(std::move(config)),
        model_(std::move(model)),
        runner_(std::move(runner)),
        plan_(std::move(plan)) {
    MetricsOptions mo;
    mo.model_name = config_.served_model_name;
    mo.max_num_seqs = config_.scheduler.max_num_seqs;
    mo.max_num_batched_tokens = config_.scheduler.max_num_batched_tokens;
    mo.max_model_len = config_.scheduler.max_model_len;
    mo.kv_blocks_total = plan_.num_blocks;
    mo.kv_block_size = plan_.block_size;
    metrics_ = std::make_unique<MetricsRegistry>(mo);

    EngineCoreConfig cc;
    cc.limits.max_num_seqs = config_.scheduler.max_num_seqs;
    cc.limits.max_num_batched_tokens = config_.scheduler.max_num_batched_tokens;
    cc.limits.policy = config_.scheduler.policy;
    cc.limits.enable_chunked_prefill = config_.scheduler.enable_chunked_prefill;
    cc.kv = {plan_.num_blocks, plan_.block_size, config_.cache.enable_prefix_caching};
    cc.speculative = config_.speculative;
    cc.tokenizer = model_->tokenizer;
    cc.eos_ids = model_->generation.eos_token_ids;
    if (model_->tokenizer && model_->tokenizer->eos_id() >= 0 &&
        std::find(cc.eos_ids.begin(), cc.eos_ids.end(), model_->tokenizer->eos_id()) ==
            cc.eos_ids.end())
      cc.eos_ids.push_back(model_->tokenizer->eos_id());
    core_ = std::make_unique<EngineCore>(cc, runner_.get(), metrics_.get());

    // --chat-template replaces the model's own (also when the caller loaded the model).
    if (!config_.load.chat_template_override.empty())
      model_->chat_template = config_.load.chat_template_override;
    const std::string& source = model_->chat_template;
    if (!source.empty()) {
      auto compiled = ChatTemplate::compile(source);
      if (compiled.is_ok()) {
        chat_template_.emplace(std::move(compiled).value());
      } else {
        chat_template_error_ =
            "the model's chat template does not compile: " + compiled.status().message();
        log_warning(chat_template_error_);
      }
    } else {
      chat_template_error_ =
          "the model has no chat template; pass one with --chat-template FILE, or send a plain "
          "prompt";
    }
    seed_rng_.seed(std::random_device{}());
    thread_ = std::thread([this] { loop(); });
  }

  ~EngineImpl() override { shutdown(); }

  Result<RequestId> submit(const RequestSpec& spec, StreamCallback on_event) override {
    LATHE_ASSIGN_OR_RETURN(CoreRequest r, prepare(spec, std::move(on_event)));
    std::vector<CoreRequest> one;
    one.push_back(std::move(r));
    LATHE_ASSIGN_OR_RETURN(std::vector<RequestId> ids, enqueue(std::move(one)));
    return ids.front();
  }

  Result<std::vector<RequestId>> submit_batch(const std::vector<RequestSpec>& specs,
                                              std::vector<StreamCallback> on_events) override {
    if (specs.size() != on_events.size())
      return invalid_argument("submit_batch: one callback per request is needed");
    std::vector<CoreRequest> batch;
    batch.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      Result<CoreRequest> r = prepare(specs[i], std::move(on_events[i]));
      if (!r.is_ok()) return r.status().with_context(strformat("request %zu", i));
      batch.push_back(std::move(r).value());
    }
    return enqueue(std::move(batch));
  }

  void abort(RequestId id) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      aborts_.push_back(id);
    }
    cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    // From a stream callback (the engine thread itself): the loop stops after this step.
    if (std::this_thread::get_id() == thread_.get_id()) return;
    std::lock_guard<std::mutex> join_lock(join_mutex_);
    if (thread_.joinable()) thread_.join();
  }

  int num_unfinished_requests() const override { return num_unfinished_.load(); }
  const LoadedModel& model() const override { return *model_; }
  const EngineConfig& config() const override { return config_; }
  const KvPlan& kv_plan() const override { return plan_; }
  const MetricsRegistry& metrics() const override { return *metrics_; }

  Result<std::vector<TokenId>> tokenize(const RequestSpec& spec) const override {
    return prompt_tokens(spec);
  }

 private:
  // Validates a request and resolves its defaults (caller's thread; touches no engine state).
  Result<CoreRequest> prepare(const RequestSpec& spec, StreamCallback on_event) {
    LATHE_ASSIGN_OR_RETURN(std::vector<TokenId> prompt, prompt_tokens(spec));
    const int32_t len = static_cast<int32_t>(prompt.size());
    const int32_t max_len = config_.scheduler.max_model_len;
    if (len >= max_len)
      return invalid_argument(strformat(
          "the prompt has %d tokens, but max-model-len is %d (prompt and output together); shorten "
          "the prompt or raise --max-model-len",
          len, max_len));
    if (static_cast<int64_t>(len) + 1 > plan_.num_tokens)
      return invalid_argument(strformat(
          "the prompt has %d tokens, more than the whole KV cache holds (%lld); shorten the prompt "
          "or give the KV cache more memory",
          len, static_cast<long long>(plan_.num_tokens)));
    LATHE_RETURN_IF_ERROR(spec.sampling.validate(runner_->vocab_size()));

    CoreRequest r;
    r.client_id = spec.client_id;
    r.sampling = spec.sampling;
    r.sampling.max_tokens = std::min(r.sampling.max_tokens, max_len - len);
    r.sampling.min_tokens = std::min(r.sampling.min_tokens, r.sampling.max_tokens);
    r.prompt = std::move(prompt);
    {
      std::lock_guard<std::mutex> lock(seed_mutex_);
      r.seed = spec.sampling.seed ? *spec.sampling.seed : seed_rng_();
    }
    // The counter drops once the final callback has returned: a thread that sees
    // num_unfinished_requests() == 0 may free whatever the callbacks use.
    r.on_event = [this, cb = std::move(on_event)](const StreamEvent& e) {
      struct Done {  // also when the callback throws (the engine core logs and goes on)
        std::atomic<int>* counter;
        bool finished;
        ~Done() {
          if (finished) counter->fetch_sub(1);
        }
      } done{&num_unfinished_, e.finished};
      if (cb) cb(e);
    };
    return r;
  }

  // Hands validated requests to the engine thread, all or none.
  Result<std::vector<RequestId>> enqueue(std::vector<CoreRequest> batch) {
    std::vector<RequestId> ids;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return cancelled("the engine is shutting down; the request was not accepted");
      const int waiting = num_unfinished_.load() - num_running_.load();
      if (waiting + static_cast<int64_t>(batch.size()) > config_.scheduler.max_waiting_requests)
        return resource_exhausted(
            strformat("the waiting queue is full (%d requests, at most %d); retry later", waiting,
                      config_.scheduler.max_waiting_requests));
      const Clock::time_point now = Clock::now();
      for (CoreRequest& r : batch) {
        r.id = next_id_++;
        r.arrival = now;
        ids.push_back(r.id);
        num_unfinished_.fetch_add(1);
        inbox_.push_back(std::move(r));
      }
    }
    cv_.notify_one();
    return ids;
  }

  Result<std::vector<TokenId>> prompt_tokens(const RequestSpec& spec) const {
    const int forms = (!spec.prompt.empty() ? 1 : 0) + (!spec.prompt_tokens.empty() ? 1 : 0) +
                      (!spec.messages.empty() ? 1 : 0);
    if (forms == 0)
      return invalid_argument("the prompt is empty: give a prompt, prompt token ids or messages");
    if (forms > 1)
      return invalid_argument("give exactly one of prompt, prompt token ids or messages");
    const int64_t vocab = runner_->vocab_size();
    if (!spec.prompt_tokens.empty()) {
      for (size_t i = 0; i < spec.prompt_tokens.size(); ++i) {
        const TokenId t = spec.prompt_tokens[i];
        if (t < 0 || t >= vocab)
          return invalid_argument(
              strformat("prompt token %zu is %d, outside the vocabulary [0, %lld)", i, t,
                        static_cast<long long>(vocab)));
      }
      return spec.prompt_tokens;
    }
    const Tokenizer* tok = model_->tokenizer.get();
    if (tok == nullptr)
      return invalid_argument(
          "this model has no tokenizer (loaded with --load-format dummy); send prompt token ids");
    std::vector<TokenId> ids;
    if (!spec.messages.empty()) {
      if (!chat_template_) return invalid_argument(chat_template_error_);
      ChatRenderOptions o;
      o.add_generation_prompt = spec.add_generation_prompt;
      if (tok->bos_id() >= 0) o.bos_token = tok->token_bytes(tok->bos_id());
      if (tok->eos_id() >= 0) o.eos_token = tok->token_bytes(tok->eos_id());
      o.variables_json = spec.chat_variables_json;
      LATHE_ASSIGN_OR_RETURN(std::string text, chat_template_->render(spec.messages, o));
      EncodeOptions eo;
      eo.add_special_tokens = false;  // the template writes BOS itself when the model wants it
      ids = tok->encode(text, eo);
    } else {
      ids = tok->encode(spec.prompt);
    }
    if (ids.empty()) return invalid_argument("the prompt is empty after tokenization");
    return ids;
  }

  void loop() {
    bool stalled = false;  // the last step scheduled nothing: wait for news, never spin
    for (;;) {
      std::vector<CoreRequest> adds;
      std::vector<RequestId> aborts;
      bool stopping = false;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        auto news = [&] { return stopping_ || !inbox_.empty() || !aborts_.empty(); };
        if (stalled) {
          cv_.wait_for(lock, std::chrono::milliseconds(10), news);
        } else {
          cv_.wait(lock, [&] { return news() || core_->has_unfinished(); });
        }
        adds.swap(inbox_);
        aborts.swap(aborts_);
        stopping = stopping_;
      }
      for (CoreRequest& r : adds) core_->add_request(std::move(r));
      for (RequestId id : aborts) core_->abort_request(id);
      if (stopping) {
        core_->abort_all();
        num_running_.store(0);
        return;
      }
      stalled = false;
      if (core_->has_unfinished()) {
        stalled = !core_->step();
      } else if (!adds.empty()) {
        core_->publish_load();
      }
      num_running_.store(core_->num_running());
    }
  }

  EngineConfig config_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<ModelRunner> runner_;
  KvPlan plan_;
  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<EngineCore> core_;  // engine thread only
  std::optional<ChatTemplate> chat_template_;
  std::string chat_template_error_;

  std::mutex mutex_;  // guards the inbox, aborts_ and stopping_
  std::condition_variable cv_;
  std::vector<CoreRequest> inbox_;
  std::vector<RequestId> aborts_;
  bool stopping_ = false;
  RequestId next_id_ = 1;
  std::atomic<int> num_unfinished_{0};
  std::atomic<int> num_running_{0};
  std::mutex seed_mutex_;
  std::mt19937_64 seed_rng_;
  std::mutex join_mutex_;
  std::thread thread_;
};

bool report(const LoadProgressCallback& progress, float fraction, const std::string& stage) {
  return !progress || progress(fraction, stage);
}

Result<std::unique_ptr<Engine>> finish_create(const EngineConfig& config,
                                              std::unique_ptr<LoadedModel> model,
                                              std::unique_ptr<ModelRunner> runner,
                                              DeviceKind device,
                                              const LoadProgressCallback& progress) {
  if (config.speculative.enabled() && !runner->verifies_draft_tokens())
    return invalid_argument(
        std::string("speculative decoding (--speculative-config) is not supported by the ") +
        device_kind_name(device) +
        " backend yet; run without --speculative-config or with --device cpu");
  const DeviceMemoryInfo& mem = runner->memory_info();
  KvPlanInput in;
  in.block_bytes = runner->kv_block_bytes(config.cache.block_size);
  in.device = device;
  in.device_name = mem.device_name.empty() ? device_kind_name(device) : mem.device_name;
  in.num_blocks_override = config.cache.num_gpu_blocks_override;
  const int64_t user_bytes = config.cache.kv_cache_memory_bytes;
  if (device == DeviceKind::kCpu) {
    in.budget_is_user_set = user_bytes > 0;
    in.budget_bytes = in.budget_is_user_set     ? user_bytes
                      : mem.kv_budget_bytes > 0 ? mem.kv_budget_bytes
                                                : default_cpu_kv_cache_bytes();
  } else {
    // What the runner measured free under --gpu-memory-utilization, or less when
    // --kv-cache-memory asks for less (several engines on one GPU: tests, side-by-side runs).
    in.budget_is_user_set = user_bytes > 0 && user_bytes < mem.kv_budget_bytes;
    in.budget_bytes = in.budget_is_user_set ? user_bytes : mem.kv_budget_bytes;
  }
  LATHE_ASSIGN_OR_RETURN(KvPlan plan, plan_kv_cache(config, in));
  if (!report(progress, 0.9f, "allocating the KV cache")) return cancelled("load cancelled");
  LATHE_RETURN_IF_ERROR(runner->allocate_kv_cache(plan.num_blocks, plan.block_size));
  log_info(plan.summary());
  auto engine = std::make_unique<EngineImpl>(config, std::move(model), std::move(runner), plan);
  report(progress, 1.0f, "ready");
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace

Result<std::vector<RequestId>> Engine::submit_batch(const std::vector<RequestSpec>& specs,
                                                    std::vector<StreamCallback> on_events) {
  if (specs.size() != on_events.size())
    return invalid_argument("submit_batch: one callback per request is needed");
  std::vector<RequestId> ids;
  for (size_t i = 0; i < specs.size(); ++i) {
    Result<RequestId> id = submit(specs[i], std::move(on_events[i]));
    if (!id.is_ok()) {
      for (RequestId done : ids) abort(done);
      return id.status().with_context(strformat("request %zu", i));
    }
    ids.push_back(id.value());
  }
  return ids;
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config,
                                               LoadProgressCallback progress) {
  LATHE_RETURN_IF_ERROR(validate_engine_config(config));
  LATHE_ASSIGN_OR_RETURN(std::string path, resolve_model_path(config.model_path));
  if (!report(progress, 0.0f, "loading " + path)) return cancelled("load cancelled");
  LATHE_ASSIGN_OR_RETURN(LoadedModel model, load_model(path, config.load));
  return create(config, std::move(model), std::move(progress));
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config, LoadedModel model,
                                               LoadProgressCallback progress) {
  LATHE_RETURN_IF_ERROR(validate_engine_config(config));
  LATHE_ASSIGN_OR_RETURN(DeviceSelection sel, select_device(config.device));
  if (!sel.notice.empty()) sel.is_fallback ? log_warning(sel.notice) : log_info(sel.notice);
  LATHE_ASSIGN_OR_RETURN(EngineConfig resolved,
                         resolve_engine_config(config, model.config, sel.device));
  if (!report(progress, 0.5f,
              std::string("preparing the model on the ") + device_kind_name(sel.device)))
    return cancelled("load cancelled");
  auto owned = std::make_unique<LoadedModel>(std::move(model));
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                         create_model_runner(*owned, resolved, sel.device));
  return finish_create(resolved, std::move(owned), std::move(runner), sel.device, progress);
}

Result<std::unique_ptr<Engine>> Engine::create_with_runner(const EngineConfig& config,
                                                           LoadedModel model,
                                                           std::unique_ptr<ModelRunner> runner) {
  LATHE_RETURN_IF_ERROR(validate_engine_config(config));
  const DeviceKind device =
      config.device.device == DeviceKind::kCuda ? DeviceKind::kCuda : DeviceKind::kCpu;
  LATHE_ASSIGN_OR_RETURN(EngineConfig resolved,
                         resolve_engine_config(config, model.config, device));
  auto owned = std::make_unique<LoadedModel>(std::move(model));
  return finish_create(resolved, std::move(owned), std::move(runner), device, nullptr);
}

}  // namespace lathe
