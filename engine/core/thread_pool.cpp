#include "engine/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LATHE_CPU_RELAX() _mm_pause()
#else
#define LATHE_CPU_RELAX() std::this_thread::yield()
#endif

namespace lathe {
namespace {

// Waits for `done()` by spinning briefly, then yielding the core: on an oversubscribed machine the
// thread we wait for may be descheduled, and spinning would only keep it off the core longer.
template <typename Pred>
void spin_then_yield(Pred done) {
  for (int i = 0; !done(); ++i) {
    if (i < 1024)
      LATHE_CPU_RELAX();
    else
      std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true);
  }
  sleep_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    const int64_t c = job.next.fetch_add(1);
    if (c >= job.num_chunks) return;
    const int64_t begin = c * job.chunk;
    (*job.fn)(begin, std::min(job.n, begin + job.chunk));
    job.remaining.fetch_sub(1);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t threads = num_threads();
  const int64_t chunk =
      std::max<int64_t>(std::max<int64_t>(min_chunk, 1), (n + threads - 1) / threads);
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  if (workers_.empty() || num_chunks == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = chunk;
  job.num_chunks = num_chunks;
  job.remaining.store(num_chunks);
  current_.store(&job);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    sleep_cv_.notify_all();
  }
  run_chunks(job);
  spin_then_yield([&] { return job.remaining.load() == 0; });
  // Retire the job; wait until no worker can still be reading it (it lives on this stack).
  current_.store(nullptr);
  spin_then_yield([&] { return active_.load() == 0; });
}

bool ThreadPool::wait_for_job(uint64_t seen) {
  using SteadyClock = std::chrono::steady_clock;
  const auto spin_until = SteadyClock::now() + std::chrono::microseconds(kSpinMicros);
  for (int i = 0;; ++i) {
    if (stop_.load()) return false;
    if (generation_.load() != seen) return true;
    if ((i & 255) == 255 && SteadyClock::now() > spin_until) break;
    if (i < 1024)
      LATHE_CPU_RELAX();
    else
      std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  sleepers_.fetch_add(1);
  sleep_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
  sleepers_.fetch_sub(1);
  return !stop_.load();
}

void ThreadPool::worker_loop() {
  uint64_t seen = generation_.load();
  for (;;) {
    if (!wait_for_job(seen)) return;
    seen = generation_.load();
    active_.fetch_add(1);
    if (Job* job = current_.load()) run_chunks(*job);
    active_.fetch_sub(1);
  }
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    if (const char* env = std::getenv("LATHE_NUM_THREADS")) return std::atoi(env);
    return 0;
  }());
  return pool;
}

}  // namespace lathe
