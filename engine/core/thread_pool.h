// A fixed pool of worker threads for data-parallel loops in the CPU backend.
//
// parallel_for splits [0, n) into fixed chunks; the caller and the workers claim chunks from a
// shared counter until none is left, and the call returns when every chunk is done. Calls from
// several threads at once are serialized. Chunk boundaries depend only on n, min_chunk and the pool
// size, and each index is computed by exactly one thread with the same code, so outputs never
// depend on which thread ran what.
//
// Latency: a decode step makes ~150 short parallel_for calls, so after a job a worker spins for a
// short while (kSpinMicros) before it sleeps on a condition variable; back-to-back calls then cost
// an atomic increment rather than a wake-up.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lathe {

class ThreadPool {
 public:
  // num_threads <= 0: one per hardware thread. The caller's thread counts as one of them.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over chunks of [0, n); chunks are at least `min_chunk` long.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

  // A process-wide pool sized from LATHE_NUM_THREADS or the hardware.
  static ThreadPool& global();

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int64_t chunk;
    int64_t num_chunks;
    std::atomic<int64_t> next{0};       // next chunk to claim
    std::atomic<int64_t> remaining{0};  // chunks not finished yet
  };
  static void run_chunks(Job& job);
  void worker_loop();
  bool wait_for_job(uint64_t seen);  // false when the pool stops

  static constexpr int64_t kSpinMicros = 200;

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::atomic<Job*> current_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};  // workers that may be touching *current_
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
};

}  // namespace lathe
