// gguf_units_rows_on_host (quant_dispatch.h): the generic kernels' decoding of the unit layout
// (quant_decode_units.cuh's decode_gguf_units) run on the host.
// kquant_rows_on_host (quant_dispatch.h): the k-quant decode kernel's per-unit arithmetic
// (quant_gemv_kquants.cuh's kq_row, kq_load_unit, kq_unit, which are __host__ __device__) run on
// the host over a part's bytes in host memory, with the activations staged as the kernel stages
// them (fp32, padded per 64, sums of each 16 inputs). Host code only: no kernel is instantiated
// here.
#include <vector>

#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_gemv_kquants.cuh"

namespace lathe::cuda::quant {
namespace {

template <int K, int M>
void rows_on_host(const QuantPart& p, const float* x, float* y) {
  const int64_t k = p.k, rf = kq_row_floats(k), groups = k / 16;
  std::vector<float> xs(static_cast<size_t>(M * rf), 0.0f), sums(static_cast<size_t>(M * groups));
  for (int mi = 0; mi < M; ++mi) {
    for (int64_t i = 0; i < k; ++i) xs[mi * rf + kq_pad(static_cast<int>(i))] = x[mi * k + i];
    for (int64_t g = 0; g < groups; ++g) {
      float s = 0.0f;
      for (int j = 0; j < 16; ++j) s += xs[mi * rf + kq_pad(static_cast<int>(16 * g + j))];
      sums[mi * groups + g] = s;
    }
  }
  KqLaunch L;
  L.parts[0] = p;
  L.nparts = 1;
  const int units = static_cast<int>(k / 64);
  for (int64_t r = 0; r < p.n; ++r) {
    const KqRowPtrs ptrs = kq_row<K>(L, static_cast<int>(p.row_offset + r));
    float out[M] = {};
    for (int unit = 0; unit < units; ++unit) {
      KqUnit u{};
      kq_load_unit<K>(ptrs, unit, u);
      kq_unit<K, M>(u, unit, xs.data(), sums.data(), k, out);
    }
    for (int mi = 0; mi < M; ++mi) y[mi * p.n + r] = out[mi];
  }
}

template <int K>
void kind_on_host(const QuantPart& p, const float* x, int64_t m, float* y) {
  if (m == 1)
    rows_on_host<K, 1>(p, x, y);
  else
    rows_on_host<K, 2>(p, x, y);
}

template <int K>
void units_rows_on_host(const QuantPart& p, float* out) {
  for (int64_t r = 0; r < p.n; ++r)
    for (int64_t c = 0; c < p.k / 32; ++c) {
      float w[32];
      decode_gguf_units<K>(p, r, c, w);
      for (int j = 0; j < 32; ++j) out[r * p.k + 32 * c + j] = w[j];
    }
}

}  // namespace

bool gguf_units_rows_on_host(int kind, const QuantPart& p, float* out) {
  if (!p.gguf_units || p.format != WeightFormat::kGguf) return false;
  switch (kind) {
    case kQ4_1:
      units_rows_on_host<kQ4_1>(p, out);
      return true;
    case kQ5_0:
      units_rows_on_host<kQ5_0>(p, out);
      return true;
    case kQ5_1:
      units_rows_on_host<kQ5_1>(p, out);
      return true;
    case kQ2K:
      units_rows_on_host<kQ2K>(p, out);
      return true;
    case kQ3K:
      units_rows_on_host<kQ3K>(p, out);
      return true;
    default:
      return false;
  }
}

bool kquant_rows_on_host(int kind, const QuantPart& p, const float* x, int64_t m, float* y) {
  if (m < 1 || m > kKquantMaxM || !kquant_takes(kind, p)) return false;
  switch (kind) {
    case kQ4K:
      kind_on_host<kQ4K>(p, x, m, y);
      return true;
    case kQ5K:
      kind_on_host<kQ5K>(p, x, m, y);
      return true;
    case kQ6K:
      kind_on_host<kQ6K>(p, x, m, y);
      return true;
    case kInt4:
      kind_on_host<kInt4>(p, x, m, y);
      return true;
    case kQ4_1:
      kind_on_host<kQ4_1>(p, x, m, y);
      return true;
    case kQ5_0:
      kind_on_host<kQ5_0>(p, x, m, y);
      return true;
    case kQ5_1:
      kind_on_host<kQ5_1>(p, x, m, y);
      return true;
    case kQ2K:
      kind_on_host<kQ2K>(p, x, m, y);
      return true;
    case kQ3K:
      kind_on_host<kQ3K>(p, x, m, y);
      return true;
    default:
      return false;
  }
}

}  // namespace lathe::cuda::quant
