#include "engine/backend/cuda/calib_transfer.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace lathe::cuda {

void parallel_memcpy(void* dst, const void* src, int64_t bytes, int threads) {
  constexpr int64_t kMinPerThread = 4 << 20;
  const int n = static_cast<int>(std::clamp<int64_t>(bytes / kMinPerThread, 1, threads));
  if (n <= 1) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  const int64_t part = (bytes / n + 4095) / 4096 * 4096;
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) {
    const int64_t b = t * part, e = std::min(bytes, b + part);
    if (b >= e) break;
    pool.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b,
                  static_cast<size_t>(e - b));
    });
  }
  std::memcpy(dst, src, static_cast<size_t>(std::min(bytes, part)));
  for (std::thread& t : pool) t.join();
}

HostStaging::~HostStaging() {
  for (cudaEvent_t& e : done_)
    if (e != nullptr) cudaEventDestroy(e);
}

Status HostStaging::init(int64_t piece_bytes) {
  piece_ = piece_bytes;
  for (int i = 0; i < 2; ++i) {
    LATHE_RETURN_IF_ERROR(stage_[i].allocate(piece_bytes, "calibration staging buffer"));
    if (done_[i] == nullptr)
      LATHE_CUDA_TRY(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
  }
  return Status();
}

Status HostStaging::upload(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  int which = 0;
  for (int64_t off = 0; off < bytes; off += piece_, which ^= 1) {
    const int64_t n = std::min(piece_, bytes - off);
    LATHE_CUDA_TRY(cudaEventSynchronize(done_[which]));  // its previous DMA has read it
    parallel_memcpy(stage_[which].get(), static_cast<const char*>(src) + off, n);
    LATHE_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(dst) + off, stage_[which].get(),
                                   static_cast<size_t>(n), cudaMemcpyHostToDevice, stream));
    LATHE_CUDA_TRY(cudaEventRecord(done_[which], stream));
  }
  return Status();
}

Status HostStaging::download(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  // Piece p goes through stage_[p % 2]: the DMA of piece p + 1 runs while piece p is copied out.
  const int64_t pieces = (bytes + piece_ - 1) / piece_;
  auto enqueue = [&](int64_t p) -> Status {
    const int64_t off = p * piece_, n = std::min(piece_, bytes - off);
    const int which = static_cast<int>(p % 2);
    LATHE_CUDA_TRY(cudaMemcpyAsync(stage_[which].get(), static_cast<const char*>(src) + off,
                                   static_cast<size_t>(n), cudaMemcpyDeviceToHost, stream));
    LATHE_CUDA_TRY(cudaEventRecord(done_[which], stream));
    return Status();
  };
  for (int64_t p = 0; p < std::min<int64_t>(2, pieces); ++p) LATHE_RETURN_IF_ERROR(enqueue(p));
  for (int64_t p = 0; p < pieces; ++p) {
    const int which = static_cast<int>(p % 2);
    const int64_t off = p * piece_, n = std::min(piece_, bytes - off);
    LATHE_CUDA_TRY(cudaEventSynchronize(done_[which]));
    parallel_memcpy(static_cast<char*>(dst) + off, stage_[which].get(), n);
    if (p + 2 < pieces) LATHE_RETURN_IF_ERROR(enqueue(p + 2));
  }
  return Status();
}

}  // namespace lathe::cuda
