// The element-wise and row-wise CPU ops: embedding, RMSNorm, RoPE, KV write, SwiGLU, ISA selection.
// linear() lives in cpu_linear.cpp, paged_attention() in cpu_attention.cpp.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/backend/cpu/cpu_dequant.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cpu/cpu_simd.h"

namespace lathe::cpu {
namespace {

bool cpu_has_avx2() {
#if LATHE_CPU_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

CpuIsa default_isa() {
  const char* env = std::getenv("LATHE_CPU_ISA");
  if (env != nullptr && std::string_view(env) == "scalar") return CpuIsa::kScalar;
  return cpu_has_avx2() ? CpuIsa::kAvx2 : CpuIsa::kScalar;
}

std::atomic<int>& isa_state() {
  static std::atomic<int> isa{static_cast<int>(default_isa())};
  return isa;
}

// One row of RMSNorm: sum of squares in double (so the result does not depend on how a parallel
// implementation would split the row), then out = (x * r) * w in float32.
float rms_scale(const float* x, int64_t dim, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return static_cast<float>(1.0 /
                            std::sqrt(ss / static_cast<double>(dim) + static_cast<double>(eps)));
}

void scale_row(const float* x, float r, const float* w, int64_t dim, float* out) {
  for (int64_t i = 0; i < dim; ++i) out[i] = (x[i] * r) * w[i];
}

#if LATHE_CPU_X86
LATHE_AVX2 void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = detail::exp_avx2(_mm256_xor_ps(g, sign));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + detail::exp_scalar(-gate[i])) * up[i];
}
#endif

}  // namespace

CpuIsa cpu_isa() {
  return static_cast<CpuIsa>(isa_state().load(std::memory_order_relaxed));
}

void set_cpu_isa(CpuIsa isa) {
  if (isa == CpuIsa::kAvx2 && !cpu_has_avx2()) isa = CpuIsa::kScalar;
  isa_state().store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* cpu_isa_name(CpuIsa isa) {
  return isa == CpuIsa::kAvx2 ? "avx2" : "scalar";
}

bool is_supported_weight_type(DType type) {
  return detail::is_supported_weight_type(type);
}

void embedding(const TensorView& table, const int32_t* ids, int64_t num_tokens, float* out) {
  const int64_t dim = table.dim(-1);
  for (int64_t t = 0; t < num_tokens; ++t)
    detail::dequant_row(table.dtype, table.row_ptr(ids[t]), out + t * dim, dim);
}

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
              float* out) {
  for (int64_t r = 0; r < rows; ++r)
    scale_row(x + r * dim, rms_scale(x + r * dim, dim, eps), weight, dim, out + r * dim);
}

void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    float* res = residual + r * dim;
    const float* xr = x + r * dim;
    for (int64_t i = 0; i < dim; ++i) res[i] += xr[i];
    scale_row(res, rms_scale(res, dim, eps), weight, dim, out + r * dim);
  }
}

// As transformers computes them in float32: inv_freq[i] = 1 / theta^(2i / d), then the scaling
// (rope_scaling, or GGUF's per-frequency factors), as rope_inverse_frequencies() states it.
std::vector<float> rope_inv_freq(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(config.rope_theta), exponent);
  }
  const RopeScaling& s = config.rope_scaling;
  if (s.type == RopeScalingType::kLinear) {
    for (float& f : inv) f = f / static_cast<float>(s.factor);
  } else if (s.type == RopeScalingType::kLlama3) {
    // transformers' _compute_llama3_parameters, operation for operation in float32 (a Python
    // number divided by a tensor is reciprocal(tensor) * number there): long wavelengths are
    // divided by the factor, short ones kept, the band between is interpolated.
    const float factor = static_cast<float>(s.factor);
    const float old_len = static_cast<float>(s.original_max_position_embeddings);
    const float low_wavelen = static_cast<float>(
        static_cast<double>(s.original_max_position_embeddings) / s.low_freq_factor);
    const float high_wavelen = static_cast<float>(
        static_cast<double>(s.original_max_position_embeddings) / s.high_freq_factor);
    const float two_pi = static_cast<float>(2.0 * M_PI);
    for (float& f : inv) {
      const float wavelen = (1.0f / f) * two_pi;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      if (wavelen < high_wavelen || wavelen > low_wavelen) {
        f = scaled;
      } else {
        const float smooth = ((1.0f / wavelen) * old_len - static_cast<float>(s.low_freq_factor)) /
                             static_cast<float>(s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
    }
  }
  // GGUF Llama 3.x carries its scaling as per-frequency divisors (rope_freqs.weight) instead.
  if (!config.rope_freq_factors.empty())
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = inv[i] / config.rope_freq_factors[i];
  return inv;
}

void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads,
          int64_t head_dim, const std::vector<float>& inv_freq, RopeStyle style) {
  const size_t n = static_cast<size_t>(num_tokens * (head_dim / 2));
  std::vector<float> cos_t(n), sin_t(n);
  rope_table(positions, num_tokens, inv_freq, cos_t.data(), sin_t.data());
  rope(x, num_tokens, num_heads, head_dim, cos_t.data(), sin_t.data(), style);
}

void rope_table(const int32_t* positions, int64_t num_tokens, const std::vector<float>& inv_freq,
                float* cos_out, float* sin_out) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t t = 0; t < num_tokens; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float angle =
          static_cast<float>(positions[t]) * inv_freq[i];  // float32, as transformers
      cos_out[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_out[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
}

void rope(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim, const float* cos_t,
          const float* sin_t, RopeStyle style) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* cos_v = cos_t + t * half;
    const float* sin_v = sin_t + t * half;
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cos_v[i] - x1 * sin_v[i];
        v[b] = x1 * cos_v[i] + x0 * sin_v[i];
      }
    }
  }
}

void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int64_t num_tokens,
              const KvLayerView& cache) {
  const int64_t row = cache.num_kv_heads * cache.head_dim;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    std::memcpy(cache.k + slot * row, k + t * row, static_cast<size_t>(row) * sizeof(float));
    std::memcpy(cache.v + slot * row, v + t * row, static_cast<size_t>(row) * sizeof(float));
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
#if LATHE_CPU_X86
  if (cpu_isa() == CpuIsa::kAvx2) {
    swiglu_avx2(gate, up, out, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + detail::exp_scalar(-gate[i])) * up[i];
}

}  // namespace lathe::cpu
