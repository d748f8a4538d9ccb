#include "engine/runtime/memory_planner.h"

#include <algorithm>

#include "engine/core/strings.h"

namespace lathe {

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
