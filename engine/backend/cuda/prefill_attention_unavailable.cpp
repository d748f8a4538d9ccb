// PrefillAttention when Lathe is built without FlashInfer (LATHE_FLASHINFER=OFF, or its headers
// could not be fetched): supports() is false, so the runner uses its own split-KV kernel for
// prefill.
#include "engine/backend/cuda/prefill_attention.h"

namespace lathe::cuda {

struct PrefillAttention::Impl {};

bool PrefillAttention::supports(DType, int64_t, int32_t) {
  return false;
}

Result<std::unique_ptr<PrefillAttention>> PrefillAttention::create(DType, int32_t, int32_t, int32_t,
                                                                   int32_t, int64_t, int32_t) {
  return unsupported(
      "this build of Lathe has no FlashInfer (configure with -DLATHE_FLASHINFER=ON after "
      "scripts/gpu/fetch-flashinfer.sh)");
}

PrefillAttention::~PrefillAttention() = default;

Status PrefillAttention::plan(const int32_t*, const int32_t*, int32_t, cudaStream_t) {
  return unsupported("no FlashInfer in this build");
}

Status PrefillAttention::run(const PrefillRunArgs&, cudaStream_t) {
  return unsupported("no FlashInfer in this build");
}

int64_t PrefillAttention::device_bytes() const {
  return 0;
}

}  // namespace lathe::cuda
