// The host-side decisions of the CUDA CalibOps (cuda_calib_ops.cpp, cuda_calib_gptq.cpp), as
// plain C++ so that they are tested without a GPU (test_cuda_calib_plan): GPTQ's column plan (dead
// columns, the act-order permutation, the mean diagonal the damping is a fraction of) and its
// damping schedule, both exactly as gptq_quantize (engine/quant/gptq.cpp) decides them; and how
// rows are cut into pieces that fit the device (mlp_act's up projection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/cuda/calib_grid.h"
#include "engine/quant/gptq.h"

namespace lathe::cuda {

// GPTQ's steps 1-2 and the damping base for a Hessian h [k, k] (row-major), as gptq.cpp:
//   dead[j]    h_jj == 0 (the column's weights become 0 and h_jj 1);
//   perm       position i of the processing order holds original column perm[i]: the identity, or
//              with act_order the columns by descending (fixed) diagonal, ties in column order
//              (std::stable_sort);
//   mean_diag  the mean of the fixed diagonal summed in processing order (the damping is
//              damp_percent times it, added to every diagonal entry).
struct GptqColumnPlan {
  std::vector<uint8_t> dead;  // [k], 1 for a dead column
  int64_t dead_columns = 0;
  std::vector<int32_t> perm;  // [k]
  double mean_diag = 0.0;
};
GptqColumnPlan plan_gptq_columns(const std::vector<double>& h, int64_t k, bool act_order);

// g_idx of the result: the group of original column perm[i] is i / group_size.
std::vector<int32_t> gptq_group_index(const std::vector<int32_t>& perm, int64_t group_size);

// The damping to try after attempt `attempt` (0-based) failed at `damp` (a fraction of the mean
// diagonal), or nullopt when gptq_quantize gives up and rounds to nearest instead (max_damp_retries
// reached, max_damp_percent passed, or no increment).
std::optional<double> gptq_next_damp(const GptqConfig& c, int attempt, double damp);

// cholesky.h's error for a factorization that stopped at `pivot` (0-based) of n with the value
// `value`, and the fallback reason gptq_quantize reports after the last try at `last_damp` failed
// with `failure`: the same text as the CPU's.
std::string not_positive_definite_message(int64_t pivot, int64_t n, double value);
std::string gptq_fallback_reason(const GptqConfig& c, double last_damp, const std::string& failure);

// The end of the piece of GPTQ's column loop that starts at column s1 of the block ending at i2
// (processing order; groups of `group` columns; a piece holds at most max_piece columns, one kernel
// launch). When a block is wider than a piece, a group that starts inside a piece must not reach
// past the piece's end while still inside the block: the CPU computes the group's grid after the
// block's earlier columns have updated all of the block's later columns, which on the GPU are only
// up to date at a piece's start. Such a piece ends where that group starts instead.
int64_t gptq_piece_end(int64_t s1, int64_t i2, int64_t group, int64_t max_piece);

// Rows of a row-wise operation processed per piece: as many as fit `budget_bytes` at
// `bytes_per_row` each (at most `rows`, at least 1 when rows > 0); 0 when not even one row fits.
int64_t plan_chunk_rows(int64_t rows, int64_t bytes_per_row, int64_t budget_bytes);

// The device grid (calib_grid.h) of an integer quantization config: its bits, symmetry, scale
// dtype (0 f32, 1 f16, 2 bf16) and min_zero.
CalibGrid calib_grid_of(const IntQuantConfig& q);

}  // namespace lathe::cuda
