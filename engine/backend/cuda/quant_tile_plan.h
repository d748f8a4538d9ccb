// How one launch of the 4-bit tile kernel (quant_gemv_tiles.cuh) covers the parts of a projection
// with two 16-row tiles per block, and which rows an epilogue (gemv_epilogue.h) sees together.
// Host logic, tested without a GPU.
//
// A block takes a task: two tiles of the projection, chosen by the pairing of the task's part:
//   kSingle       one tile per block (the one-part kernel: task j = tile j)
//   kAdjacent     tiles 2j and 2j + 1 of the part (plain stores; RoPE pairs (2i, 2i + 1) and the
//                 v rows of kRopeKv are adjacent rows of one tile)
//   kHeadHalves   with h = j / (H / 2), a = j % (H / 2) and H = tiles_per_head: tiles h H + a and
//                 h H + a + H / 2: the two halves of a head, so that row r of the first tile and
//                 row r of the second are a NeoX rotation pair (H = head_dim / 16); with H = n / 16
//                 of one gate|up part, a SwiGLU pair (gate row t, up row inter + t)
//   kAcrossParts  tile j of this part and tile j of the next one (gate and up stored as two
//                 parts: a SwiGLU pair); the next part has no tasks of its own
// Requirements checked by plan_tile_pairs: every part in the tile layout (int4_tiles) with the
// same k and group size, at most kTileMaxParts parts, and the rows each pairing needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cuda/gemv_epilogue.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/status.h"

namespace lathe::cuda {

enum class TilePairing : int32_t { kSingle, kAdjacent, kHeadHalves, kAcrossParts };

constexpr int kTileMaxParts = 3;

struct TilePlan {
  int32_t nparts = 0;
  TilePairing pairing[kTileMaxParts] = {};
  // Blocks [first_task[i], first_task[i + 1]) take part i's tasks.
  int32_t first_task[kTileMaxParts + 1] = {};
  int32_t tiles_per_head = 0;  // kHeadHalves' H
  int32_t tasks() const { return first_task[nparts]; }
  int32_t tiles_per_task() const { return pairing[0] == TilePairing::kSingle ? 1 : 2; }
};

// The one-part plan of the one-tile-per-block kernel.
TilePlan single_tile_plan(const QuantPart& p);

// One part, two adjacent tiles per task (kAdjacent), for its stored or residual-added product on
// the streaming kernel; false when the part has an odd number of tiles.
bool adjacent_tile_plan(const QuantPart& p, TilePlan* plan);

// Plans `parts` (rows [row_offset, row_offset + n) of a projection of n_total rows) for one launch
// of two tiles per block that applies `output` to the projection's product (rope: kRopeKv's
// parameters; null otherwise). An error names what does not fit (the caller then runs the parts
// one launch each, and the epilogue's own kernel).
Result<TilePlan> plan_tile_pairs(const std::vector<QuantPart>& parts, int64_t n_total,
                                 GemvOutput output, const GemvRopeKv* rope);

}  // namespace lathe::cuda
