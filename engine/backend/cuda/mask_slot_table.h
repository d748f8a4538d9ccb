// The bookkeeping of the CUDA runner's device-resident mask cache (constrained decoding,
// step_executor.h): which allowed-token mask each of its slots holds, and which slot a step's row
// reads. A mask is a TokenMask object (model_io.h: immutable and shared once made; a grammar
// returns the same object for every visit of a state), so the object is the key: a table entry
// holds a reference to it, which keeps the address from naming another mask while cached.
//
// A row whose mask is cached reads its slot, and the step uploads nothing for it; a new mask takes
// a free slot, else the least recently used one that no row of the current step reads, and the
// caller uploads its words into it before the step's sampler runs (a copy queued on the sampler's
// stream after every earlier step's sampler, so no sampler reads a slot while it is rewritten).
// When every slot is taken by the current step, find_or_assign() says so and the caller packs the
// row's words with the step instead.
//
// Plain C++ (no CUDA): unit-tested on the CPU. One owner, one thread (the engine's).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/runtime/model_io.h"

namespace lathe::cuda {

class MaskSlotTable {
 public:
  struct Slot {
    int32_t index = -1;  // -1: no slot free for this step (pack the words with the step)
    bool fresh = false;  // newly assigned: upload the mask's words into it before the step samples
  };

  explicit MaskSlotTable(int32_t num_slots = 0);

  // Starts a step: slots its rows take from here on are not reassigned until the next step.
  void begin_step();
  // The slot `mask` (non-null) is in, or a newly assigned one (fresh).
  Slot find_or_assign(const std::shared_ptr<const TokenMask>& mask);
  // Forgets every slot (after a failed upload, or when the device buffer goes).
  void clear();

  int32_t num_slots() const { return static_cast<int32_t>(held_.size()); }
  int32_t num_held() const { return static_cast<int32_t>(index_.size()); }
  // Rows served from a slot, slots (re)filled, rows that found every slot taken: since creation.
  int64_t hits() const { return hits_; }
  int64_t uploads() const { return uploads_; }
  int64_t overflows() const { return overflows_; }

 private:
  std::vector<std::shared_ptr<const TokenMask>> held_;  // per slot; null: free
  std::vector<uint64_t> last_step_;                     // per slot: the step that last read it
  std::unordered_map<const TokenMask*, int32_t> index_;
  uint64_t step_ = 1;  // slots last read at step 0 are free
  int64_t hits_ = 0, uploads_ = 0, overflows_ = 0;
};

}  // namespace lathe::cuda
