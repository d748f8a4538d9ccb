// The streaming W4A16 decode kernel (quant_gemv_stream.cu), Hopper only: the products of 4-bit
// parts in the tile layout (int4_tiles.h) at batches of 1 to 8, as the tile kernel
// (quant_gemv_tiles.cuh) computes them, bit for bit, with the weights streamed instead of loaded
// per block. Included by quant_linear_int.cu and quant_gemv_stream.cu only.
//
// Design (docs/gpu-notes.md, "A streaming W4A16 kernel"):
// - A persistent grid (blocks per multiprocessor x multiprocessors, at most one per task); block b
//   takes the tasks (TilePlan: two 16-row tiles each) b, b + grid, b + 2 grid, ...
// - Each of the 8 warps owns the same run of 64-input chunks of every task as in the tile kernel
//   (chunks c0..c1 of the k split), and lane 0 keeps its codes in flight with the bulk-copy engine
//   (bulk_copy.cuh): a ring of `stages` stages per warp, each four chunks of both tiles (4 KB: one
//   2 KB copy per tile), refilled once the warp has used what it read from a stage, across task
//   boundaries. No register holds a load in flight, so the ring can be deep without costing
//   occupancy.
// - The tiles' scales and zero points come with the task, copied whole by thread 0 into one of two
//   slots in shared memory (a task's slot is read until the block's end-of-task barrier).
// - The activations (m rows, or with the RMSNorm input their normalization) are staged once per
//   block in shared memory: for a persistent block, once per launch.
// - The weights are never written by the forward pass, so the first stages and the first task's
//   scales are copied before the PDL wait, over the previous kernel's tail.
// Per chunk the arithmetic is the tile kernel's (decode, mma.sync, scaled fp32 sums) and the warps'
// partial sums are added in warp order, so each output equals the tile kernel's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/quant_gemv_tiles.cuh"

namespace lathe::cuda::quant {

// Whether the streaming kernel takes a launch of these parts (the same k, group size, scale type
// and zero-point presence; what the tile kernel requires otherwise) at batch m (bf16 or f16
// activations): the parts' int4_stream_max_m, a GPU of compute capability 9 or later, 16-byte
// aligned codes, scales and zero points, and the shared memory of the launch.
bool stream_kernel_takes(const QuantPart* parts, int nparts, int64_t m);

// One launch of the streaming kernel for L (a plan of two tiles per task: kAdjacent, kHeadHalves
// or kAcrossParts; any output). x: [m, k] activations (unused with L.norm.residual set).
cudaError_t launch_gemv_stream(const TileLaunch& L, DType act, const void* x, int64_t m,
                               cudaStream_t stream);

}  // namespace lathe::cuda::quant
