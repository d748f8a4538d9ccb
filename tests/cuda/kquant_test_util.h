// GGUF parts for the k-quant kernel's CUDA tests (cuda_gguf_quant_test.cpp,
// cuda_kquant_parts_test.cpp): random blocks, and their device part as the upload stores it (Q4_K
// blocks as they are, Q5_K's high bits in unit order, Q6_K split into 208-byte slots and its d
// array, gguf_repack.h; Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K in the unit layout, gguf_units.h).
#pragma once

#include <QtGlobal>

#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend/cuda/gguf_repack.h"
#include "engine/backend/cuda/gguf_units.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/half.h"
#include "engine/model/layer_weights.h"
#include "test_support.h"

namespace lathe::test {

// Blocks of random bytes (every code, sub-block scale, min and high-bit pattern; Q6_K's and Q3_K's
// scales of both signs) with finite positive f16 block scales d (and dmin / m) in [0.002, 0.02):
// Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, Q4_1, Q5_0, Q5_1.
inline std::vector<uint8_t> random_kquant_blocks(DType type, int64_t n, int64_t k, uint32_t seed) {
  const int64_t bb = dtype_info(type).block_bytes;
  std::vector<uint8_t> blocks(static_cast<size_t>(n * k / dtype_info(type).block_size * bb));
  std::mt19937 rng(seed);
  for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng() & 0xFF);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::vector<int64_t> at = {0, 2};  // Q4_K, Q5_K, Q4_1, Q5_1: d, dmin / m
  if (type == DType::kQ6_K) at = {208};
  if (type == DType::kQ2_K) at = {80, 82};
  if (type == DType::kQ3_K) at = {108};
  if (type == DType::kQ5_0) at = {0};
  for (size_t b = 0; b < blocks.size(); b += static_cast<size_t>(bb))
    for (int64_t off : at) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(&blocks[b + static_cast<size_t>(off)], &h, 2);
    }
  return blocks;
}

// The device part of [n, k] blocks of `type` as the upload stores it; `buffers` owns its memory.
struct KquantDevicePart {
  cuda::QuantPart part;
  std::vector<Dev> buffers;
};
inline KquantDevicePart kquant_device_part(DType type, const std::vector<uint8_t>& blocks,
                                           int64_t n, int64_t k) {
  KquantDevicePart d;
  cuda::QuantPart& p = d.part;
  p.format = WeightFormat::kGguf;
  p.gguf_type = type;
  p.n = n;
  p.k = k;
  const WeightMatrix m = plain_matrix("blk.0.ffn_down", make_view(type, {n, k}, blocks.data()));
  if (cuda::gguf_takes_units(m)) {  // Q4_1, Q5_0, Q5_1, Q2_K, Q3_K: the unit layout
    auto r = cuda::gguf_to_units(m);
    if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
    d.buffers.push_back(Dev::from(r.value().data));
    d.buffers.push_back(Dev::from(r.value().scales));
    p.data = d.buffers[0].get();
    p.scales = d.buffers[1].get();
    if (!r.value().zeros.empty()) {
      d.buffers.push_back(Dev::from(r.value().zeros));
      p.gguf_aux = d.buffers[2].get();
    }
    p.gguf_units = true;
    return d;
  }
  if (type == DType::kQ5_K) {
    auto r = cuda::gguf_reorder_q5k(m);
    if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
    d.buffers.push_back(Dev::from(r.value().data));
    p.data = d.buffers[0].get();
    p.gguf_q5k_units = true;
    return d;
  }
  if (type != DType::kQ6_K) {
    d.buffers.push_back(Dev::from(blocks));
    p.data = d.buffers[0].get();
    return d;
  }
  auto r = cuda::gguf_split_q6k(m);
  if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
  d.buffers.push_back(Dev::from(r.value().data));
  d.buffers.push_back(Dev::from(r.value().scales));
  p.data = d.buffers[0].get();
  p.scales = d.buffers[1].get();
  p.scale_dtype = DType::kF16;
  p.gguf_q6k_split = true;
  return d;
}

}  // namespace lathe::test
