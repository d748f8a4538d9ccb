#include "engine/server/server_context.h"

#include <chrono>
#include <random>
#include <vector>

#include "engine/core/strings.h"

namespace lathe {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

ServerContext::ServerContext(Engine& e, const ServerConfig& c, std::string name)
    : engine(e),
      config(c),
      model_name(std::move(name)),
      created_unix(std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count()),
      max_model_len(e.config().scheduler.max_model_len),
      tokenizer(e.model().tokenizer.get()) {
  std::random_device rd;
  id_state_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
              static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  request_log.set_log_lines(c.log_requests);
}

std::string ServerContext::new_id(const char* prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t a = splitmix64(id_state_);
  const uint64_t b = splitmix64(id_state_);
  return strformat("%s-%016llx%08llx", prefix, static_cast<unsigned long long>(a),
                   static_cast<unsigned long long>(b & 0xffffffffull));
}

void ServerContext::add_active(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_.insert(id);
}

void ServerContext::remove_active(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_.erase(id);
  if (active_.empty()) idle_cv_.notify_all();
}

int64_t ServerContext::num_active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(active_.size());
}

int64_t ServerContext::abort_all_active() {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ids.assign(active_.begin(), active_.end());
  }
  for (const RequestId id : ids) engine.abort(id);
  return static_cast<int64_t>(ids.size());
}

bool ServerContext::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_cv_.wait_for(lock, timeout, [&] { return active_.empty(); });
}

std::shared_ptr<const TokenVocabulary> ServerContext::vocabulary() {
  std::call_once(vocabulary_once_, [this] {
    if (tokenizer != nullptr) vocabulary_ = std::make_shared<const TokenVocabulary>(*tokenizer);
  });
  return vocabulary_;
}

Result<std::shared_ptr<GrammarConstraint>> ServerContext::grammar(const std::string& regex) {
  {
    std::lock_guard<std::mutex> lock(grammar_mutex_);
    for (auto it = grammars_.begin(); it != grammars_.end(); ++it) {
      if (it->first != regex) continue;
      grammars_.splice(grammars_.begin(), grammars_, it);
      return grammars_.front().second;
    }
  }
  std::shared_ptr<const TokenVocabulary> vocab = vocabulary();
  if (!vocab)
    return invalid_argument(
        "structured output needs the model's tokenizer (this model was loaded without one)");
  LATHE_ASSIGN_OR_RETURN(std::shared_ptr<GrammarConstraint> g,
                         GrammarConstraint::create(regex, vocab));
  std::lock_guard<std::mutex> lock(grammar_mutex_);
  grammars_.emplace_front(regex, g);
  if (grammars_.size() > kRecentGrammars) grammars_.pop_back();
  return g;
}

}  // namespace lathe
