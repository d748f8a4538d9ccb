#include "engine/runtime/parallel.h"

#include "engine/core/strings.h"

namespace lathe {

Status ParallelConfig::validate() const {
  if (world_size < 1)
    return invalid_argument(strformat("the tensor-parallel size must be >= 1, got %d", world_size));
  if (rank < 0 || rank >= world_size)
    return invalid_argument(strformat("rank %d is outside [0, %d)", rank, world_size));
  if (world_size > 1 && comm == nullptr)
    return invalid_argument(strformat(
        "a tensor-parallel size of %d needs a communicator between the ranks", world_size));
  if (comm != nullptr && (comm->world_size() != world_size || comm->rank() != rank))
    return invalid_argument(
        strformat("the communicator is rank %d of %d, the configuration rank %d of %d",
                  comm->rank(), comm->world_size(), rank, world_size));
  return Status();
}

Result<ShardRange> shard_range(int64_t n, const ParallelConfig& p, const std::string& what) {
  LATHE_RETURN_IF_ERROR(p.validate());
  if (n % p.world_size != 0)
    return invalid_argument(
        strformat("%s (%lld) cannot be split evenly over %d ranks; choose a tensor-parallel size "
                  "that divides it",
                  what.c_str(), static_cast<long long>(n), p.world_size));
  const int64_t count = n / p.world_size;
  return ShardRange{count * p.rank, count};
}

Status require_single_rank(const ParallelConfig& p, const std::string& backend) {
  LATHE_RETURN_IF_ERROR(p.validate());
  if (p.world_size != 1)
    return unsupported(strformat(
        "%s runs a model on one device; a tensor-parallel size of %d is not available in this "
        "version (use --tensor-parallel-size 1)",
        backend.c_str(), p.world_size));
  return Status();
}

}  // namespace lathe
