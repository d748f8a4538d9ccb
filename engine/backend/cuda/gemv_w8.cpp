#include "engine/backend/cuda/gemv_w8.h"

#include <string>

namespace lathe::cuda {

Status check_w8(const char* who, const GemvW8& w, int64_t n) {
  const std::string name = who;
  if (w.nparts < 1 || w.nparts > kGemvMaxParts)
    return invalid_argument(name + ": 8-bit weights in 1 to " + std::to_string(kGemvMaxParts) +
                            " parts");
  for (int i = 0; i < w.nparts; ++i) {
    const GemvW8Part& q = w.parts[i];
    if (q.codes == nullptr || q.scales == nullptr || reinterpret_cast<uintptr_t>(q.codes) % 16 != 0)
      return invalid_argument(name + ": an 8-bit part without 16-byte aligned codes or scales");
    const int64_t next = i + 1 < w.nparts ? w.parts[i + 1].row_begin : n;
    if ((i == 0 && q.row_begin != 0) || q.row_begin >= next)
      return invalid_argument(name + ": 8-bit parts must cover rows 0..n in order");
  }
  const GemvW8Scales& s = w.scales;
  if (s.row_shift < 0 || s.row_shift > 30 || s.row_stride < 0 || s.group_shift < 4 ||
      s.group_shift > 31)
    return invalid_argument(name + ": 8-bit scales need row_shift 0..30, group_shift 4..31");
  return Status();
}

}  // namespace lathe::cuda
