// Helpers for engine tests: collect a request's stream, wait for requests with a timeout, check
// that nothing leaked.
#pragma once

#include <QtTest>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/metrics.h"

namespace lathe::test {

// Everything a request's stream delivered. Thread-safe (events arrive on the engine thread).
struct Collected {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<TokenId> tokens;
  std::string text;
  int num_events = 0;
  int events_after_finish = 0;
  bool finished = false;
  StreamEvent last;
  RequestTimeline timeline;
  MetricsSnapshot at_finish;  // metrics as the final event was delivered

  StreamCallback callback(const Engine* engine = nullptr) {
    return [this, engine](const StreamEvent& e) {
      std::lock_guard<std::mutex> lock(mutex);
      if (finished) ++events_after_finish;  // must stay 0: checked by wait()
      tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
      text += e.text;
      ++num_events;
      if (e.finished) {
        finished = true;
        last = e;
        if (e.timeline) timeline = *e.timeline;
        if (engine) at_finish = engine->metrics().snapshot();
      }
      cv.notify_all();
    };
  }
  // True once the final event came (and nothing came after it).
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, timeout, [&] { return finished; }) && events_after_finish == 0;
  }
  bool wait_tokens(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, timeout, [&] { return tokens.size() >= n || finished; });
  }
};

// Waits until the engine has no unfinished request.
inline bool wait_idle(const Engine& engine,
                      std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (engine.num_unfinished_requests() > 0) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Every block free or cached-free, no request running or waiting.
inline QString leak_report(const Engine& engine) {
  const MetricsSnapshot s = engine.metrics().snapshot();
  if (engine.num_unfinished_requests() != 0 || s.num_requests_running != 0 ||
      s.num_requests_waiting != 0 || s.kv_blocks_used != 0 ||
      s.kv_blocks_used + s.kv_blocks_cached + s.kv_blocks_free != s.kv_blocks_total)
    return QString(
               "leak: %1 unfinished, %2 running, %3 waiting, blocks used %4 + cached %5 + free %6 "
               "of %7")
        .arg(engine.num_unfinished_requests())
        .arg(s.num_requests_running)
        .arg(s.num_requests_waiting)
        .arg(s.kv_blocks_used)
        .arg(s.kv_blocks_cached)
        .arg(s.kv_blocks_free)
        .arg(s.kv_blocks_total);
  return {};
}

}  // namespace lathe::test

// Submits and verifies acceptance, evaluating the call once (LATHE_QVERIFY_RESULT evaluates its
// argument twice).
#define LATHE_SUBMIT_OK(call)            \
  do {                                   \
    auto lathe_submit_ = (call);         \
    LATHE_QVERIFY_RESULT(lathe_submit_); \
  } while (0)

#define LATHE_VERIFY_NO_LEAKS(engine)                               \
  do {                                                              \
    QVERIFY(::lathe::test::wait_idle(engine));                      \
    const QString lathe_leak_ = ::lathe::test::leak_report(engine); \
    QVERIFY2(lathe_leak_.isEmpty(), qPrintable(lathe_leak_));       \
  } while (0)
