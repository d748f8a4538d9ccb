#include "engine/runtime/memory_planner.h"

#include <algorithm>
#include <cmath>

#include "engine/core/strings.h"

namespace lathe {

Status check_weights_fit(const WeightFit& f) {
  auto bytes = [](int64_t b) { return format_bytes(static_cast<double>(b)); };
  const std::string smaller =
      "a quantized format (a GPTQ, AWQ, FP8 or GGUF checkpoint of the model, or --quantization "
      "int4, int8 or fp8) or a smaller model";
  if (f.budget_bytes < 0) {  // RAM: no utilization budget, only what the machine has
    if (f.weight_bytes <= f.total_bytes) return Status();
    return out_of_memory(
        strformat("the weights of %s need %s of %s, more than the machine's %s; use ",
                  f.model.c_str(), bytes(f.weight_bytes).c_str(), f.device.c_str(),
                  bytes(f.total_bytes).c_str()) +
        smaller);
  }
  const std::string need = strformat("the weights of %s need %s on %s", f.model.c_str(),
                                     bytes(f.weight_bytes).c_str(), f.device.c_str());
  if (f.weight_bytes > f.free_bytes)
    return out_of_memory(
        need +
        strformat(", but %s of its %s are free; use ", bytes(f.free_bytes).c_str(),
                  bytes(f.total_bytes).c_str()) +
        smaller +
        ", or free the GPU of other processes (neither a smaller --max-model-len nor a higher "
        "--gpu-memory-utilization helps: the weights alone do not fit)");
  if (f.weight_bytes <= f.budget_bytes) return Status();
  const std::string head =
      need + strformat(", more than --gpu-memory-utilization %.2f leaves for this model (%s of %s)",
                       f.utilization, bytes(f.budget_bytes).c_str(), bytes(f.total_bytes).c_str());
  // The utilization at which the weights alone would fit, rounded up to a hundredth.
  const double at_least =
      std::ceil((f.utilization + static_cast<double>(f.weight_bytes - f.budget_bytes) /
                                     static_cast<double>(std::max<int64_t>(1, f.total_bytes))) *
                100.0) /
      100.0;
  if (at_least < 1.0)
    return out_of_memory(head +
                         strformat("; raise --gpu-memory-utilization above %.2f (the KV cache "
                                   "needs room as well), or use ",
                                   at_least) +
                         smaller);
  return out_of_memory(head + "; use " + smaller);
}

MemoryPlanner::MemoryPlanner(int64_t total, int64_t in_use) : total_(total), in_use_(in_use) {}

MemoryPlanner::Id MemoryPlanner::reserve(std::string owner, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const Id id = next_id_++;
  reservations_.push_back({id, {std::move(owner), std::max<int64_t>(0, bytes)}});
  return id;
}

void MemoryPlanner::resize(Id id, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : reservations_)
    if (r.first == id) r.second.second = std::max<int64_t>(0, bytes);
}

void MemoryPlanner::release(Id id) {
  std::lock_guard<std::mutex> lock(mu_);
  reservations_.erase(std::remove_if(reservations_.begin(), reservations_.end(),
                                     [id](const auto& r) { return r.first == id; }),
                      reservations_.end());
}

int64_t MemoryPlanner::reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t sum = 0;
  for (const auto& r : reservations_) sum += r.second.second;
  return sum;
}

int64_t MemoryPlanner::budget(double utilization) const {
  const int64_t allowed = static_cast<int64_t>(static_cast<double>(total_) * utilization);
  return std::max<int64_t>(0, allowed - in_use_ - reserved());
}

std::string MemoryPlanner::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string s;
  for (const auto& r : reservations_) {
    if (!s.empty()) s += ", ";
    s += r.second.first + ": " + format_bytes(static_cast<double>(r.second.second));
  }
  return s.empty() ? std::string("nothing reserved") : s;
}

MemoryReservation::MemoryReservation(MemoryPlanner* planner, std::string owner, int64_t bytes)
    : planner_(planner), bytes_(bytes) {
  if (planner_ != nullptr) id_ = planner_->reserve(std::move(owner), bytes);
}

MemoryReservation::MemoryReservation(MemoryReservation&& o) noexcept
    : planner_(o.planner_), id_(o.id_), bytes_(o.bytes_) {
  o.planner_ = nullptr;
  o.id_ = 0;
  o.bytes_ = 0;
}

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& o) noexcept {
  if (this != &o) {
    reset();
    planner_ = o.planner_;
    id_ = o.id_;
    bytes_ = o.bytes_;
    o.planner_ = nullptr;
    o.id_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void MemoryReservation::resize(int64_t bytes) {
  bytes_ = bytes;
  if (planner_ != nullptr) planner_->resize(id_, bytes);
}

void MemoryReservation::reset() {
  if (planner_ != nullptr) planner_->release(id_);
  planner_ = nullptr;
  id_ = 0;
  bytes_ = 0;
}

}  // namespace lathe
