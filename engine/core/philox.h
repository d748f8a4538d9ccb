// Philox-4x32-10 counter-based random numbers (Salmon et al., SC'11), usable on the host and in
// CUDA kernels. Sampling draws one number per (request seed, output step, token id), so a seeded
// request gives the same tokens on the CPU and the GPU, alone or in any batch.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LATHE_HD __host__ __device__ __forceinline__
#else
#define LATHE_HD inline
#endif

namespace lathe {

struct Philox4 {
  uint32_t v[4];
};

LATHE_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                               uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// A uniform float in (0, 1] for (seed, step, index): 24 random bits, never 0 (so -log(u) is
// finite).
LATHE_HD float philox_uniform(uint64_t seed, uint64_t step, uint32_t index) {
  const Philox4 r =
      philox4x32_10(index, static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), 0u,
                    static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return (static_cast<float>(r.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);
}

}  // namespace lathe
