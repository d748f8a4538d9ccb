#include "engine/quant/dummy_weights.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/core/half.h"
#include "engine/core/philox.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "engine/model/tensor_names.h"

namespace lathe {
namespace {

enum class Fill { kOnes, kZeros, kNormal };

Fill fill_of(const std::string& name) {
  if (ends_with(name, "norm")) return Fill::kOnes;
  if (ends_with(name, "_bias")) return Fill::kZeros;
  return Fill::kNormal;
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The four values of counter c: two Box-Muller pairs from Philox's four words, scaled to the
// standard deviation and rounded to bf16.
void normal4(uint64_t key, int64_t c, float v[4]) {
  const Philox4 r =
      philox4x32_10(static_cast<uint32_t>(c), static_cast<uint32_t>(static_cast<uint64_t>(c) >> 32),
                    0u, 0u, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  for (int p = 0; p < 2; ++p) {
    const float u1 = static_cast<float>((r.v[2 * p] >> 8) + 1) * (1.0f / 16777216.0f);  // (0, 1]
    const float u2 = static_cast<float>(r.v[2 * p + 1] >> 8) * (1.0f / 16777216.0f);    // [0, 1)
    const float radius = kDummyWeightStd * std::sqrt(-2.0f * std::log(u1));
    v[2 * p] = bf16_to_f32(f32_to_bf16(radius * std::cos(kTwoPi * u2)));
    v[2 * p + 1] = bf16_to_f32(f32_to_bf16(radius * std::sin(kTwoPi * u2)));
  }
}

}  // namespace

DummyWeights::DummyWeights(const ModelConfig& config) {
  for (const ExpectedTensor& t : expected_tensors(config)) shapes_[t.name] = t.shape;
}

std::vector<int64_t> DummyWeights::shape(const std::string& canonical) const {
  const auto it = shapes_.find(canonical);
  return it == shapes_.end() ? std::vector<int64_t>{} : it->second;
}

int64_t DummyWeights::numel(const std::string& canonical) const {
  int64_t n = 1;
  for (int64_t d : shape(canonical)) n *= d;
  return n;
}

Status DummyWeights::read(const std::string& canonical, int64_t offset, int64_t count,
                          float* out) const {
  if (!has(canonical))
    return not_found("dummy weights: the config has no tensor '" + canonical + "'");
  const int64_t n = numel(canonical);
  if (offset < 0 || count < 0 || offset + count > n)
    return invalid_argument(
        strformat("dummy weights: elements [%lld, %lld) are outside '%s' (%lld)",
                  static_cast<long long>(offset), static_cast<long long>(offset + count),
                  canonical.c_str(), static_cast<long long>(n)));
  const Fill fill = fill_of(canonical);
  if (fill != Fill::kNormal) {
    std::fill(out, out + count, fill == Fill::kOnes ? 1.0f : 0.0f);
    return Status::ok();
  }
  const uint64_t key = fnv1a64(canonical);
  // Counters c0 .. c1 cover the range; each task fills whole counters.
  const int64_t c0 = offset / 4, c1 = (offset + count + 3) / 4;
  ThreadPool::global().parallel_for(
      c1 - c0,
      [&](int64_t begin, int64_t end) {
        float v[4];
        for (int64_t c = c0 + begin; c < c0 + end; ++c) {
          normal4(key, c, v);
          for (int64_t j = 0; j < 4; ++j) {
            const int64_t i = 4 * c + j;
            if (i >= offset && i < offset + count) out[i - offset] = v[j];
          }
        }
      },
      16384);
  return Status::ok();
}

Result<std::vector<float>> DummyWeights::read(const std::string& canonical) const {
  std::vector<float> out(static_cast<size_t>(numel(canonical)));
  LATHE_RETURN_IF_ERROR(read(canonical, 0, static_cast<int64_t>(out.size()), out.data()));
  return out;
}

}  // namespace lathe
