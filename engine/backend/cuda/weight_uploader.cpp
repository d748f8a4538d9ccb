#include "engine/backend/cuda/weight_uploader.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cuda/cast.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dequant.h"

namespace lathe::cuda {

Status Uploader::upload(const std::string& name, const TensorView& src, const Target& dst) {
  if (src.memory != MemoryKind::kHost) return invalid_argument(name + ": expected a host tensor");
  if (!can_dequantize(src.dtype))
    return unsupported(name + ": the CUDA backend cannot load " +
                       std::string(dtype_name(src.dtype)) + " weights");
  const int64_t rows = src.rows(), cols = src.row_elems();
  if (cols != dst.cols) return internal_error(name + ": column count mismatch");
  const bool raw =
      src.dtype == DType::kF32 || src.dtype == DType::kF16 || src.dtype == DType::kBF16;
  const DType staged = raw ? src.dtype : DType::kF32;
  const int64_t staged_row = cols * static_cast<int64_t>(staged == DType::kF32 ? 4 : 2);
  const int64_t dst_elem = dst.dtype == DType::kF32 ? 4 : 2;
  const int64_t chunk_rows = std::max<int64_t>(1, kStagingBytes / staged_row);
  if (staged_row > kStagingBytes)
    return unsupported(name + ": a row is larger than the upload staging buffer");
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t r1 = std::min(rows, r0 + chunk_rows);
    const int b = next_;
    next_ ^= 1;
    LATHE_CUDA_TRY(cudaEventSynchronize(done_[b]));  // the buffer's previous copy has finished
    uint8_t* h = host_[b].as<uint8_t>();
    if (raw) {
      std::memcpy(h, src.row_ptr(r0), static_cast<size_t>((r1 - r0) * staged_row));
    } else {
      float* f = reinterpret_cast<float*>(h);
      ThreadPool::global().parallel_for(
          r1 - r0,
          [&](int64_t a, int64_t e) { dequantize_rows(src, r0 + a, r0 + e, f + a * cols); }, 16);
    }
    uint8_t* out = static_cast<uint8_t*>(dst.base) + (dst.row_offset + r0) * cols * dst_elem;
    const int64_t bytes = (r1 - r0) * staged_row;
    if (staged == dst.dtype) {
      LATHE_CUDA_TRY(
          cudaMemcpyAsync(out, h, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
    } else {
      LATHE_CUDA_TRY(cudaMemcpyAsync(dev_[b].get(), h, static_cast<size_t>(bytes),
                                     cudaMemcpyHostToDevice, stream_));
      LATHE_RETURN_IF_ERROR(cast(staged, dev_[b].get(), dst.dtype, out, (r1 - r0) * cols, stream_));
    }
    LATHE_CUDA_TRY(cudaEventRecord(done_[b], stream_));
  }
  return Status();
}

Status Uploader::upload_raw(const std::string& name, const void* src, int64_t bytes, void* dst) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int64_t off = 0; off < bytes; off += kStagingBytes) {
    const int64_t n = std::min(kStagingBytes, bytes - off);
    const int b = next_;
    next_ ^= 1;
    LATHE_CUDA_TRY(cudaEventSynchronize(done_[b]));  // the buffer's previous copy has finished
    std::memcpy(host_[b].get(), in + off, static_cast<size_t>(n));
    LATHE_CUDA_TRY(cudaMemcpyAsync(out + off, host_[b].get(), static_cast<size_t>(n),
                                   cudaMemcpyHostToDevice, stream_));
    LATHE_CUDA_TRY(cudaEventRecord(done_[b], stream_));
  }
  (void)name;
  return Status();
}

}  // namespace lathe::cuda
