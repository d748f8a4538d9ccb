// A non-owning view of a dense tensor in host memory (or device memory, when `device` says so).
// Shapes are in PyTorch order: shape[0] is the slowest-varying dimension, the last one is
// contiguous. For a weight matrix of a Linear layer with K inputs and N outputs: shape = {N, K},
// rows are output channels. Block-quantized types pack the last dimension in blocks (K % block_size
// == 0).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "engine/core/dtype.h"

namespace lathe {

enum class MemoryKind : uint8_t { kHost, kCuda };

struct TensorView {
  static constexpr int kMaxDims = 4;

  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  const void* data = nullptr;
  MemoryKind memory = MemoryKind::kHost;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  // Rows of the last dimension: numel / dim(-1).
  int64_t rows() const { return ndim == 0 ? 1 : numel() / shape[ndim - 1]; }
  int64_t row_elems() const { return ndim == 0 ? 1 : shape[ndim - 1]; }
  // Bytes of one row of the last dimension (quantized rows hold row_elems/block_size blocks).
  int64_t row_bytes() const;
  int64_t nbytes() const { return rows() * row_bytes(); }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
  const uint8_t* row_ptr(int64_t r) const { return bytes() + r * row_bytes(); }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }

  std::string shape_string() const;  // "[576, 1536]"
};

TensorView make_view(DType dtype, std::initializer_list<int64_t> shape, const void* data);

}  // namespace lathe
