// A fixed pool of worker threads for data-parallel loops in the CPU backend.
// parallel_for splits [0, n) into contiguous chunks, runs them on the workers and the calling
// thread, and returns when all are done. Calls from several threads at once are serialized.
// The split of work never changes results: each index is computed by exactly one thread with the
// same code, so outputs are identical for any thread count.
#pragma once

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
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace lathe
