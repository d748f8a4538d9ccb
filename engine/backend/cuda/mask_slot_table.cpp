#include "engine/backend/cuda/mask_slot_table.h"

#include <algorithm>

namespace lathe::cuda {

MaskSlotTable::MaskSlotTable(int32_t num_slots)
    : held_(static_cast<size_t>(std::max(num_slots, 0))),
      last_step_(static_cast<size_t>(std::max(num_slots, 0)), 0) {}

void MaskSlotTable::begin_step() {
  ++step_;
}

MaskSlotTable::Slot MaskSlotTable::find_or_assign(const std::shared_ptr<const TokenMask>& mask) {
  const auto it = index_.find(mask.get());
  if (it != index_.end()) {
    last_step_[static_cast<size_t>(it->second)] = step_;
    ++hits_;
    return Slot{it->second, false};
  }
  // A free slot (last read at step 0: never), else the least recently read one not read by this
  // step.
  int32_t victim = -1;
  for (size_t s = 0; s < held_.size(); ++s) {
    if (last_step_[s] >= step_) continue;
    if (victim < 0 || last_step_[s] < last_step_[static_cast<size_t>(victim)])
      victim = static_cast<int32_t>(s);
    if (!held_[s]) break;
  }
  if (victim < 0) {
    ++overflows_;
    return Slot{};
  }
  std::shared_ptr<const TokenMask>& slot = held_[static_cast<size_t>(victim)];
  if (slot) index_.erase(slot.get());
  slot = mask;
  index_[mask.get()] = victim;
  last_step_[static_cast<size_t>(victim)] = step_;
  ++uploads_;
  return Slot{victim, true};
}

void MaskSlotTable::clear() {
  for (auto& h : held_) h.reset();
  std::fill(last_step_.begin(), last_step_.end(), 0);
  index_.clear();
}

}  // namespace lathe::cuda
