// A stand-in Engine for the HTTP layer's unit tests: no model, deterministic output, its own
// thread. Each running request produces one token per tick; token k of a request is the letter
// 'a' + k % 26 (so "abcd..." is the text of max_tokens tokens) and the request finishes with
// "length" after max_tokens (or "stop" when the text ends with one of its stop strings). Aborts
// end a request at the next tick with "abort". Each running request holds one "KV block", visible
// in the metrics, so tests can see a disconnect free it.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "engine/runtime/engine.h"
#include "engine/runtime/metrics.h"

namespace lathe::test {

// Bytes as tokens: id = byte value; 256 is BOS, 257 is EOS.
class ByteTokenizer final : public Tokenizer {
 public:
  ByteTokenizer() {
    bos_id_ = 256;
    eos_id_ = 257;
    add_bos_ = true;  // encode() with add_special_tokens prepends BOS
    kind_ = "bpe";
  }
  std::vector<TokenId> encode(std::string_view text,
                              const EncodeOptions& options = {}) const override {
    std::vector<TokenId> ids;
    if (options.add_special_tokens) ids.push_back(bos_id_);
    for (const unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string token_bytes(TokenId id) const override {
    if (id == 256) return "<s>";
    if (id == 257) return "</s>";
    return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
  }
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const override {
    std::string s;
    for (const TokenId id : ids)
      if (!(skip_special && id >= 256)) s += token_bytes(id);
    return s;
  }
  int64_t vocab_size() const override { return 258; }
  bool is_special(TokenId id) const override { return id >= 256; }
  TokenId token_to_id(std::string_view t) const override {
    return t.size() == 1 ? static_cast<unsigned char>(t[0]) : -1;
  }
};

inline MetricsOptions fake_metrics_options() {
  MetricsOptions o;
  o.model_name = "fake-model";
  o.max_num_seqs = 64;
  o.max_model_len = 256;
  o.kv_blocks_total = 1000;
  o.kv_block_size = 16;
  return o;
}

struct FakeEngineOptions {
  std::chrono::milliseconds tick{2};
  int32_t max_model_len = 256;
  int32_t max_waiting =
      1000000;  // submit() fails with kResourceExhausted beyond this many unfinished
};

class FakeEngine final : public Engine {
 public:
  using Options = FakeEngineOptions;

  explicit FakeEngine(Options options = Options{})
      : options_(options), metrics_(fake_metrics_options()) {
    model_.path = "/models/fake-model.gguf";
    model_.config.name = "fake-model";
    model_.config.vocab_size = 258;
    model_.tokenizer = std::make_shared<ByteTokenizer>();
    config_.scheduler.max_model_len = options.max_model_len;
    config_.scheduler.max_num_seqs = 64;
    kv_plan_.num_blocks = 1000;
    kv_plan_.block_size = 16;
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeEngine() override { shutdown(); }

  Result<RequestId> submit(const RequestSpec& spec, StreamCallback on_event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return cancelled("the engine is shut down");
    if (static_cast<int32_t>(requests_.size()) >= options_.max_waiting)
      return resource_exhausted("the waiting queue is full");
    Status s = spec.sampling.validate(model_.config.vocab_size);
    if (!s.is_ok()) return s;
    const RequestId id = next_id_++;
    auto r = std::make_unique<Req>();
    r->spec = spec;
    r->prompt_tokens = !spec.prompt_tokens.empty()
                           ? static_cast<int32_t>(spec.prompt_tokens.size())
                           : static_cast<int32_t>(tokenize(spec).value().size());
    r->callback = std::move(on_event);
    r->timeline.arrival = Clock::now();
    requests_[id] = std::move(r);
    peak_unfinished_ = std::max<int64_t>(peak_unfinished_, static_cast<int64_t>(requests_.size()));
    last_spec_ = spec;
    ++submitted_;
    cv_.notify_all();
    return id;
  }

  void abort(RequestId id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = requests_.find(id); it != requests_.end()) it->second->aborted = true;
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
      for (auto& [id, r] : requests_) r->aborted = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  int num_unfinished_requests() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(requests_.size());
  }
  const LoadedModel& model() const override { return model_; }
  const EngineConfig& config() const override { return config_; }
  const KvPlan& kv_plan() const override { return kv_plan_; }
  const MetricsRegistry& metrics() const override { return metrics_; }

  Result<std::vector<TokenId>> tokenize(const RequestSpec& spec) const override {
    if (!spec.prompt_tokens.empty()) return spec.prompt_tokens;
    std::string text = spec.prompt;
    for (const ChatMessage& m : spec.messages) text += m.role + ": " + m.content + "\n";
    if (!spec.messages.empty() && spec.add_generation_prompt) text += "assistant: ";
    return model_.tokenizer->encode(text);
  }

  int64_t num_aborted() const { return aborted_count_.load(); }
  // Most requests ever unfinished at once.
  int64_t peak_unfinished() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_unfinished_;
  }
  int64_t num_submitted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return submitted_;
  }
  // Stops producing tokens (requests stay running) until resumed.
  void pause(bool paused) {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = paused;
    cv_.notify_all();
  }
  // The last spec submitted (to check what the server passed on).
  RequestSpec last_spec() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_spec_;
  }

 private:
  struct Req {
    RequestSpec spec;
    int32_t prompt_tokens = 0;
    StreamCallback callback;
    RequestTimeline timeline;
    std::string text;
    int32_t generated = 0;
    bool aborted = false;
  };

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopped_ || !requests_.empty(); });
      if (stopped_ && requests_.empty()) break;
      lock.unlock();
      std::this_thread::sleep_for(options_.tick);
      lock.lock();
      MetricsUpdate update;
      update.time = Clock::now();
      std::vector<RequestId> done;
      for (auto& [id, r] : requests_) {
        StreamEvent e;
        e.id = id;
        if (r->aborted) {
          e.finished = true;
          e.finish_reason = FinishReason::kAbort;
          aborted_count_.fetch_add(1);
        } else if (paused_) {
          continue;
        } else {
          const TokenId tok = 'a' + r->generated % 26;
          ++r->generated;
          e.text = std::string(1, static_cast<char>(tok));
          e.token_ids = {tok};
          if (r->spec.sampling.logprobs >= 0) {
            SampledToken s;
            s.token = tok;
            s.logprob = -0.5f;
            for (int32_t k = 0; k < r->spec.sampling.logprobs; ++k)
              s.top_logprobs.push_back(TokenLogprob{static_cast<TokenId>('a' + k), -0.5f - k});
            e.logprobs.push_back(s);
          }
          r->text += e.text;
          const Clock::time_point now = Clock::now();
          if (r->generated == 1) r->timeline.first_token = now;
          r->timeline.token_times.push_back(now);
          for (const std::string& stop : r->spec.sampling.stop) {
            if (r->text.size() >= stop.size() &&
                r->text.compare(r->text.size() - stop.size(), stop.size(), stop) == 0) {
              e.finished = true;
              e.finish_reason = FinishReason::kStop;
              e.stop_reason = stop;
              e.text.clear();  // the stop string is not shown
            }
          }
          if (!e.finished && r->generated >= r->spec.sampling.max_tokens) {
            e.finished = true;
            e.finish_reason = FinishReason::kLength;
          }
        }
        e.usage.prompt_tokens = r->prompt_tokens;
        e.usage.completion_tokens = r->generated;
        if (e.finished) {
          r->timeline.finished = Clock::now();
          e.timeline = &r->timeline;
          done.push_back(id);
          FinishedRequestPoint p;
          p.id = id;
          p.reason = e.finish_reason;
          p.prompt_tokens = r->prompt_tokens;
          p.generation_tokens = r->generated;
          update.finished.push_back(p);
        }
        r->callback(e);
      }
      for (const RequestId id : done) requests_.erase(id);
      EngineLoad load;
      load.num_running = static_cast<int32_t>(requests_.size());
      load.kv_blocks_used = load.num_running;
      load.kv_blocks_free = 1000 - load.num_running;
      update.load = load;
      metrics_.record(update);
    }
  }

  Options options_;
  LoadedModel model_;
  EngineConfig config_;
  KvPlan kv_plan_;
  MetricsRegistry metrics_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<RequestId, std::unique_ptr<Req>> requests_;
  RequestId next_id_ = 1;
  int64_t submitted_ = 0;
  int64_t peak_unfinished_ = 0;
  std::atomic<int64_t> aborted_count_{0};
  RequestSpec last_spec_;
  bool stopped_ = false;
  bool paused_ = false;
  std::thread thread_;
};

}  // namespace lathe::test
