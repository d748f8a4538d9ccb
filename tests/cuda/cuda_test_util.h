// Helpers of the CUDA tests: GPU detection (tests QSKIP without one), device buffers filled from
// host vectors, bf16/f16 rounding on the host, and the relative error norm the tolerances are
// stated in.
#pragma once

#include <QtTest>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "test_support.h"

namespace lathe::test {

// QSKIPs the calling test when no usable GPU exists (CI; any CUDA error counts as "no GPU"), or
// fails it when LATHE_REQUIRE_GPU=1 (test_support.h).
#define LATHE_REQUIRE_GPU()                                                          \
  do {                                                                               \
    std::string lathe_why_;                                                          \
    if (!::lathe::cuda_device_available(&lathe_why_)) LATHE_GPU_MISSING(lathe_why_); \
  } while (0)

#define LATHE_CUDA_CHECK(expr) QCOMPARE(static_cast<int>(expr), static_cast<int>(cudaSuccess))

// Uniform values in [lo, hi), never all zero.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Fast uniform values in [-scale, scale) for inputs of ~100M values (a xorshift, not mt19937).
inline std::vector<float> fast_random(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<float>(static_cast<int32_t>(s >> 32)) * (scale / 2147483648.0f);
  }
  return v;
}

// Rounds every value to the given 16-bit type and back (the values a bf16/f16 tensor holds).
inline std::vector<float> round_to(DType t, std::vector<float> v) {
  for (float& x : v)
    x = t == DType::kBF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
  return v;
}

inline std::vector<uint16_t> encode16(DType t, const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = t == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  return out;
}

inline std::vector<float> decode16(DType t, const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = t == DType::kBF16 ? bf16_to_f32(v[i]) : f16_to_f32(v[i]);
  return out;
}

// A device copy of a host vector (or `bytes` of 0xFF poison when data is empty).
struct Dev {
  cuda::DeviceBuffer buf;
  template <typename T>
  static Dev from(const std::vector<T>& v) {
    Dev d;
    const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(T));
    if (!d.buf.allocate(std::max<int64_t>(bytes, 16), "test buffer").is_ok())
      qFatal("cudaMalloc failed in a test");
    if (bytes > 0 && cudaMemcpy(d.buf.get(), v.data(), static_cast<size_t>(bytes),
                                cudaMemcpyHostToDevice) != cudaSuccess)
      qFatal("cudaMemcpy failed in a test");
    return d;
  }
  // Uninitialized-looking output: all bytes 0xFF (NaN in f32, bf16 and f16), so unwritten elements
  // show.
  static Dev poisoned(int64_t bytes) {
    Dev d;
    if (!d.buf.allocate(std::max<int64_t>(bytes, 16), "test buffer").is_ok())
      qFatal("cudaMalloc failed in a test");
    cudaMemset(d.buf.get(), 0xFF, static_cast<size_t>(std::max<int64_t>(bytes, 16)));
    return d;
  }
  void* get() const { return buf.get(); }
  template <typename T>
  T* as() const {
    return buf.as<T>();
  }
  template <typename T>
  std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    if (cudaMemcpy(v.data(), buf.get(), n * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
      qFatal("cudaMemcpy (download) failed in a test");
    return v;
  }
};

// ||out - ref|| / ||ref||; NaN anywhere gives infinity (unwritten or broken outputs never pass).
inline double rel_error(const std::vector<float>& out, const std::vector<float>& ref) {
  if (out.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]) && out[i] != ref[i]) return INFINITY;
    if (std::isinf(ref[i]) && out[i] == ref[i]) continue;
    const double d = static_cast<double>(out[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

#define LATHE_QVERIFY_REL(out, ref, tol)                                              \
  do {                                                                                \
    const double lathe_err_ = ::lathe::test::rel_error((out), (ref));                 \
    QVERIFY2(lathe_err_ <= (tol),                                                     \
             qPrintable(QString("relative error %1 > %2").arg(lathe_err_).arg(tol))); \
  } while (0)

}  // namespace lathe::test
