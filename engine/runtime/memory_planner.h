// Device memory shared by every model loaded on one device in this process (a target model and its
// draft; two variants of a model compared side by side) and by their KV caches. Instead of each
// runner measuring free memory as if it were alone, each one asks the device's planner:
//
//   planner created   records what was already in use (other processes, the driver's context)
//   model loads       reserves what its load took (weights, activations, workspaces, graphs),
//                     measured by the backend around its own allocations
//   KV cache          reserves its bytes when allocated
//   kv_budget(u)      what one more allocation may take under utilization u:
//                     u * total - in use at creation - every reservation (never below 0)
//   runner destroyed  its reservations are released
//
// Thread-safe. Budgets are plans, not allocations: the backend still allocates for real and reports
// an allocation failure as an error with the numbers.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

class MemoryPlanner {
 public:
  // total: the device's memory; in_use: bytes in use when the planner was created. Bytes.
  MemoryPlanner(int64_t total, int64_t in_use);

  using Id = uint64_t;
  // Records `bytes` for `owner` ("Llama-3.1-8B weights and activations", "KV cache of 512 blocks");
  // returns the reservation's id.
  Id reserve(std::string owner, int64_t bytes);
  // Changes a reservation's size (a runner that re-measures after capturing its graphs).
  void resize(Id id, int64_t bytes);
  // Drops a reservation (unknown ids are ignored).
  void release(Id id);

  // What may still be planned under `utilization` (a share of total in (0, 1]).
  int64_t budget(double utilization) const;
  int64_t total() const { return total_; }
  int64_t in_use_at_start() const { return in_use_; }
  int64_t reserved() const;
  // "weights and activations of X: 15.2 GiB, KV cache of 512 blocks: 60.0 GiB"
  std::string describe() const;

  // Held while a backend measures the memory its load takes, so that two loads on one device do not
  // count each other's allocations.
  std::mutex& measure_mutex() { return measure_; }

 private:
  mutable std::mutex mu_;
  std::mutex measure_;
  int64_t total_;
  int64_t in_use_;
  Id next_id_ = 1;
  std::vector<std::pair<Id, std::pair<std::string, int64_t>>> reservations_;
};

// Whether a model's weights fit on a device, asked before they are allocated. Bytes.
struct WeightFit {
  std::string model;         // the model's name, for the message
  std::string device;        // "NVIDIA H200", "RAM"
  int64_t weight_bytes = 0;  // the weights as the backend stores them on the device
  int64_t free_bytes = 0;    // free on the device now (GPU)
  int64_t total_bytes = 0;   // the device's memory
  // GPU: what MemoryPlanner::budget(utilization) leaves, and the utilization; < 0: no such
  // budget (RAM, where only total_bytes bounds the weights: the OS pages and overcommits).
  int64_t budget_bytes = -1;
  double utilization = 0.0;
};
// kOutOfMemory when weight_bytes exceeds what is free or the utilization's budget, with the numbers
// (needed, free, total, the budget) and what to do: a quantized format or a smaller model when the
// weights alone exceed what is free (no --max-model-len or --gpu-memory-utilization helps then);
// the --gpu-memory-utilization that would hold them when only the budget is short.
Status check_weights_fit(const WeightFit& fit);

// A reservation released when it goes out of scope (a runner holds its own).
class MemoryReservation {
 public:
  MemoryReservation() = default;
  MemoryReservation(MemoryPlanner* planner, std::string owner, int64_t bytes);
  ~MemoryReservation() { reset(); }
  MemoryReservation(MemoryReservation&& o) noexcept;
  MemoryReservation& operator=(MemoryReservation&& o) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  void resize(int64_t bytes);
  void reset();
  int64_t bytes() const { return bytes_; }

 private:
  MemoryPlanner* planner_ = nullptr;
  MemoryPlanner::Id id_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace lathe
