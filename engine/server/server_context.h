// State shared by the route handlers of one ApiServer (internal to engine/server).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/token_vocabulary.h"
#include "engine/runtime/engine.h"
#include "engine/server/api_server.h"
#include "engine/server/request_log.h"

namespace lathe {

class ServerContext {
 public:
  ServerContext(Engine& engine, const ServerConfig& config, std::string model_name);

  Engine& engine;
  const ServerConfig config;
  const std::string model_name;
  const int64_t created_unix;   // server start, Unix seconds ("created" of /v1/models)
  const int32_t max_model_len;  // the engine's, with defaults resolved
  const Tokenizer* tokenizer;   // null for models loaded without one (--load-format dummy)
  RequestLog request_log;

  std::atomic<bool> draining{false};  // stop() began: new generation requests get 503
  std::atomic<int64_t> requests_total{0};
  std::atomic<int64_t> requests_rejected{0};
  std::atomic<int64_t> client_disconnects{0};

  // The tokenizer's vocabulary for constrained decoding, built on first use (null without a
  // tokenizer). Thread-safe.
  std::shared_ptr<const TokenVocabulary> vocabulary();

  // The compiled constraint of `regex`, shared by every request with the same grammar (its DFA
  // and mask cache stay warm across requests: the engine thread is their only user once
  // submitted); the kRecentGrammars most recently used stay compiled. Thread-safe.
  Result<std::shared_ptr<GrammarConstraint>> grammar(const std::string& regex);

  // A fresh response id: "<prefix>-" + 24 random hex digits.
  std::string new_id(const char* prefix);

  // Engine requests being served (so that stop() can abort them).
  void add_active(RequestId id);
  void remove_active(RequestId id);
  int64_t num_active() const;
  // Aborts every active request; returns how many there were.
  int64_t abort_all_active();
  // Waits until no request is active or `timeout` passes; true when none is.
  bool wait_until_idle(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::unordered_set<RequestId> active_;
  static constexpr size_t kRecentGrammars = 8;
  std::mutex grammar_mutex_;
  std::list<std::pair<std::string, std::shared_ptr<GrammarConstraint>>> grammars_;  // recent first
  std::once_flag vocabulary_once_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  uint64_t id_state_;
};

}  // namespace lathe
