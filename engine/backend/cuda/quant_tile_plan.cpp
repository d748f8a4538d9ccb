#include "engine/backend/cuda/quant_tile_plan.h"

#include "engine/backend/cuda/int4_tiles.h"
#include "engine/core/strings.h"

namespace lathe::cuda {

TilePlan single_tile_plan(const QuantPart& p) {
  TilePlan plan;
  plan.nparts = 1;
  plan.pairing[0] = TilePairing::kSingle;
  plan.first_task[1] = static_cast<int32_t>(p.n / kInt4TileRows);
  return plan;
}

bool adjacent_tile_plan(const QuantPart& p, TilePlan* plan) {
  const int64_t tiles = p.n / kInt4TileRows;
  if (p.n % kInt4TileRows != 0 || tiles % 2 != 0) return false;
  *plan = TilePlan{};
  plan->nparts = 1;
  plan->pairing[0] = TilePairing::kAdjacent;
  plan->first_task[1] = static_cast<int32_t>(tiles / 2);
  return true;
}

Result<TilePlan> plan_tile_pairs(const std::vector<QuantPart>& parts, int64_t n_total,
                                 GemvOutput output, const GemvRopeKv* rope) {
  auto no = [](const std::string& why) { return unsupported("tile pairs: " + why); };
  if (parts.empty() || parts.size() > static_cast<size_t>(kTileMaxParts))
    return no(strformat("1 to %d parts, got %zu", kTileMaxParts, parts.size()));
  for (const QuantPart& p : parts) {
    if (!p.int4_tiles || p.one_row_gemv) return no("a part is not in the 4-bit tile layout");
    if (!p.int4_tile_pairs) return no("turned off (LATHE_CUDA_INT4_TILE_PAIRS=0)");
    if (p.k != parts[0].k || p.group_size != parts[0].group_size)
      return no("the parts differ in input width or group size");
  }
  TilePlan plan;
  plan.nparts = static_cast<int32_t>(parts.size());
  const auto tiles = [](const QuantPart& p) { return static_cast<int32_t>(p.n / kInt4TileRows); };
  // kAdjacent for part i: an even number of tiles.
  auto adjacent = [&](size_t i) -> Status {
    if (tiles(parts[i]) % 2 != 0) return no("a part has an odd number of 16-row tiles");
    plan.pairing[i] = TilePairing::kAdjacent;
    plan.first_task[i + 1] = plan.first_task[i] + tiles(parts[i]) / 2;
    return Status();
  };
  // kHeadHalves for part i with H tiles per head (the part a whole number of heads).
  auto halves = [&](size_t i, int64_t rows_per_head) -> Status {
    if (rows_per_head % (2 * kInt4TileRows) != 0 || parts[i].row_offset % rows_per_head != 0 ||
        parts[i].n % rows_per_head != 0)
      return no("a part's heads do not split into pairs of 16-row tiles");
    const int32_t h = static_cast<int32_t>(rows_per_head / kInt4TileRows);
    if (plan.tiles_per_head != 0 && plan.tiles_per_head != h)
      return no("parts with different head sizes");
    plan.tiles_per_head = h;
    plan.pairing[i] = TilePairing::kHeadHalves;
    plan.first_task[i + 1] = plan.first_task[i] + tiles(parts[i]) / 2;
    return Status();
  };
  switch (output) {
    case GemvOutput::kStore:
      for (size_t i = 0; i < parts.size(); ++i) LATHE_RETURN_IF_ERROR(adjacent(i));
      return plan;
    case GemvOutput::kSwiglu: {
      const int64_t inter = n_total / 2;
      if (n_total % 2 != 0) return no("SwiGLU needs gate and up rows of equal count");
      if (parts.size() == 1 && parts[0].row_offset == 0 && parts[0].n == n_total) {
        LATHE_RETURN_IF_ERROR(halves(0, n_total));
        return plan;
      }
      if (parts.size() == 2 && parts[0].row_offset == 0 && parts[0].n == inter &&
          parts[1].row_offset == inter && parts[1].n == inter) {
        plan.pairing[0] = TilePairing::kAcrossParts;
        plan.pairing[1] = TilePairing::kAcrossParts;
        plan.first_task[1] = plan.first_task[2] = tiles(parts[0]);
        return plan;
      }
      return no("SwiGLU needs one gate|up part or a gate part and an up part of equal rows");
    }
    case GemvOutput::kRopeKv: {
      if (rope == nullptr) return no("RoPE/KV without its parameters");
      const int64_t hd = rope->head_dim;
      const int64_t qk_rows = static_cast<int64_t>(rope->num_heads + rope->num_kv_heads) * hd;
      if (hd <= 0 || n_total != qk_rows + static_cast<int64_t>(rope->num_kv_heads) * hd)
        return no("the projection's rows are not the q, k and v heads");
      for (size_t i = 0; i < parts.size(); ++i) {
        const QuantPart& p = parts[i];
        const bool qk = p.row_offset + p.n <= qk_rows;
        if (!qk && p.row_offset < qk_rows) return no("a part spans k and v rows");
        if (!qk || rope->style == RopeStyle::kInterleaved) {
          // v rows (written as projected) and interleaved pairs: adjacent rows of one tile.
          if (p.row_offset % 2 != 0) return no("a part starts at an odd row");
          LATHE_RETURN_IF_ERROR(adjacent(i));
        } else {
          LATHE_RETURN_IF_ERROR(halves(i, hd));
        }
      }
      return plan;
    }
    case GemvOutput::kResidualAdd:
      break;
  }
  return no("no such epilogue on the tile kernel");
}

}  // namespace lathe::cuda
