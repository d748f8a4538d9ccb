// How a model is split over several devices (tensor parallelism), as a seam: a parallel
// configuration (world size, this rank, a communicator) reaches weight upload and the forward pass.
// The forward plan (engine/model/forward_plan.h) names the points where ranks combine their partial
// results: each residual_add sums the projection over the ranks first (all_reduce), and the head
// joins each rank's slice of the vocabulary (gather_vocab) before sampling. Backends accept world
// size 1 only today and refuse more with an error that says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe {

// Collective operations among the ranks of one model. `data`, `in` and `out` are in the memory of
// the backend's device; `stream` is the backend's stream (a cudaStream_t for CUDA), passed opaquely
// so that this header needs no backend headers.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int32_t world_size() const = 0;
  virtual int32_t rank() const = 0;
  // data[0, count) = the sum of every rank's data[0, count).
  virtual Status all_reduce_sum(void* data, int64_t count, DType dtype, void* stream) = 0;
  // out[r * count, (r + 1) * count) = rank r's in[0, count), on every rank.
  virtual Status all_gather(const void* in, void* out, int64_t count, DType dtype,
                            void* stream) = 0;
};

struct ParallelConfig {
  int32_t world_size = 1;  // ranks the weights are split over (vLLM's --tensor-parallel-size)
  int32_t rank = 0;        // this runner's rank, [0, world_size)
  std::shared_ptr<Communicator> comm;  // set when world_size > 1

  Status validate() const;
};

// The share of `n` rows (attention heads, MLP columns, vocabulary rows) that `rank` holds when they
// are split evenly over the ranks.
struct ShardRange {
  int64_t begin = 0;
  int64_t count = 0;
};
// Fails when n is not a multiple of the world size (`what` names the dimension in the message).
Result<ShardRange> shard_range(int64_t n, const ParallelConfig& parallel, const std::string& what);

// The backends' refusal of world sizes they cannot run (`backend`: "the CUDA backend").
Status require_single_rank(const ParallelConfig& parallel, const std::string& backend);

}  // namespace lathe
