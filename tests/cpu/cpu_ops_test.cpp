// CPU ops against straightforward double-precision references, quantized linear against the
// loader's dequantize_row, and the invariances the engine relies on: results independent of the
// batch size, the thread count and the instruction-set path.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/core/half.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dequant.h"
#include "test_support.h"

using namespace lathe;

namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float std = 1.0f) {
  std::normal_distribution<float> d(0.f, std);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Random bytes for `rows` rows of `k` elements of `type`, with sane f16 scale fields.
std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t k, std::mt19937& rng) {
  const DTypeInfo& info = dtype_info(type);
  const int64_t row_bytes = k / info.block_size * info.block_bytes;
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * row_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  auto put_f16 = [&](uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  if (type == DType::kF32 || type == DType::kF16 || type == DType::kBF16) {
    for (int64_t i = 0; i < rows * k; ++i) {
      const float v = scale(rng) * 10;
      if (type == DType::kF32) std::memcpy(bytes.data() + 4 * i, &v, 4);
      if (type == DType::kF16) put_f16(bytes.data() + 2 * i, v);
      if (type == DType::kBF16) {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    return bytes;
  }
  for (int64_t b = 0; b < rows * k / info.block_size; ++b) {
    uint8_t* blk = bytes.data() + b * info.block_bytes;
    switch (type) {
      case DType::kQ8_0:
      case DType::kQ4_0:
      case DType::kQ5_0:
        put_f16(blk, scale(rng));
        break;
      case DType::kQ4_1:
      case DType::kQ5_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        put_f16(blk, scale(rng));
        put_f16(blk + 2, scale(rng));
        break;
      case DType::kQ6_K:
        put_f16(blk + 208, scale(rng) * 0.1f);
        break;
      case DType::kQ2_K:
        put_f16(blk + 80, scale(rng));
        put_f16(blk + 82, scale(rng));
        break;
      case DType::kQ3_K:
        put_f16(blk + 108, scale(rng) * 0.1f);
        break;
      default:
        break;
    }
  }
  return bytes;
}

std::vector<float> dequantized(const TensorView& w) {
  std::vector<float> out(static_cast<size_t>(w.numel()));
  for (int64_t r = 0; r < w.dim(0); ++r)
    dequantize_row(w.dtype, w.row_ptr(r), out.data() + r * w.dim(1), w.dim(1));
  return out;
}

const DType kAllWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                 DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                 DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                                 DType::kQ6_K};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Restores the default ISA when a test changes it.
struct IsaGuard {
  cpu::CpuIsa saved = cpu::cpu_isa();
  ~IsaGuard() { cpu::set_cpu_isa(saved); }
};

struct AttentionCase {
  int64_t num_heads, num_kv_heads, head_dim;
  int32_t block_size;
  std::vector<int32_t> ctx_lens;  // per sequence, after this step
  std::vector<int32_t> q_lens;    // query tokens this step (the last q_len positions)
  int32_t sliding_window = 0;
};

struct AttentionData {
  std::vector<float> q, k_cache, v_cache, out;
  std::vector<int32_t> query_start, seq_lens, block_tables;
  int32_t max_blocks = 0;
  // Logical K/V per sequence, [ctx, kv_heads, head_dim], for the reference.
  std::vector<std::vector<float>> k_seq, v_seq;
};

AttentionData make_attention(const AttentionCase& c, std::mt19937& rng) {
  AttentionData d;
  const int32_t s_count = static_cast<int32_t>(c.ctx_lens.size());
  int32_t total_blocks = 0;
  for (int32_t len : c.ctx_lens) {
    d.max_blocks = std::max(d.max_blocks, (len + c.block_size - 1) / c.block_size);
    total_blocks += (len + c.block_size - 1) / c.block_size;
  }
  total_blocks += 3;  // unused blocks in the pool
  std::vector<int32_t> perm(static_cast<size_t>(total_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const int64_t row = c.num_kv_heads * c.head_dim;
  d.k_cache = randn(static_cast<size_t>(total_blocks) * c.block_size * row,
                    rng);  // garbage in unused slots
  d.v_cache = randn(d.k_cache.size(), rng);
  d.block_tables.assign(static_cast<size_t>(s_count) * d.max_blocks, 0);
  d.query_start.push_back(0);
  size_t next = 0;
  for (int32_t s = 0; s < s_count; ++s) {
    const int32_t len = c.ctx_lens[s];
    for (int32_t b = 0; b < (len + c.block_size - 1) / c.block_size; ++b)
      d.block_tables[s * d.max_blocks + b] = perm[next++];
    d.k_seq.push_back(randn(static_cast<size_t>(len) * row, rng));
    d.v_seq.push_back(randn(static_cast<size_t>(len) * row, rng));
    for (int32_t p = 0; p < len; ++p) {
      const int64_t slot =
          int64_t{d.block_tables[s * d.max_blocks + p / c.block_size]} * c.block_size +
          p % c.block_size;
      std::copy_n(d.k_seq[s].data() + p * row, row, d.k_cache.data() + slot * row);
      std::copy_n(d.v_seq[s].data() + p * row, row, d.v_cache.data() + slot * row);
    }
    d.seq_lens.push_back(len);
    d.query_start.push_back(d.query_start.back() + c.q_lens[s]);
  }
  d.q = randn(static_cast<size_t>(d.query_start.back()) * c.num_heads * c.head_dim, rng);
  d.out.assign(d.q.size(), 0.f);
  return d;
}

void run_attention(const AttentionCase& c, AttentionData& d, ThreadPool& pool) {
  cpu::PagedAttentionArgs a;
  a.q = d.q.data();
  a.out = d.out.data();
  a.query_start = d.query_start.data();
  a.seq_lens = d.seq_lens.data();
  a.block_tables = d.block_tables.data();
  a.num_seqs = static_cast<int32_t>(d.seq_lens.size());
  a.max_blocks_per_seq = d.max_blocks;
  a.num_heads = c.num_heads;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.sliding_window = c.sliding_window;
  cpu::KvLayerView kv;
  kv.k = d.k_cache.data();
  kv.v = d.v_cache.data();
  kv.block_size = c.block_size;
  kv.num_kv_heads = c.num_kv_heads;
  kv.head_dim = c.head_dim;
  cpu::paged_attention(a, kv, pool);
}

// Max |out - reference| with a double-precision softmax attention over the logical K/V.
double attention_error(const AttentionCase& c, const AttentionData& d) {
  double worst = 0;
  const int64_t hd = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (size_t s = 0; s < d.seq_lens.size(); ++s) {
    const int32_t q_len = d.query_start[s + 1] - d.query_start[s];
    for (int32_t j = 0; j < q_len; ++j) {
      const int32_t pos = d.seq_lens[s] - q_len + j;
      const int32_t lo = c.sliding_window > 0 ? std::max(0, pos - c.sliding_window + 1) : 0;
      for (int64_t h = 0; h < c.num_heads; ++h) {
        const float* q = d.q.data() + ((d.query_start[s] + j) * c.num_heads + h) * hd;
        const int64_t kvh = h / group;
        std::vector<double> w;
        double mx = -1e300;
        for (int32_t p = lo; p <= pos; ++p) {
          const float* k = d.k_seq[s].data() + (p * c.num_kv_heads + kvh) * hd;
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(q[i]) * k[i];
          w.push_back(dot * scale);
          mx = std::max(mx, w.back());
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        const float* out = d.out.data() + ((d.query_start[s] + j) * c.num_heads + h) * hd;
        for (int64_t i = 0; i < hd; ++i) {
          double ref = 0;
          for (int32_t p = lo; p <= pos; ++p)
            ref += w[p - lo] / sum * d.v_seq[s][(p * c.num_kv_heads + kvh) * hd + i];
          worst = std::max(worst, std::abs(ref - out[i]));
        }
      }
    }
  }
  return worst;
}

}  // namespace

class CpuOpsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { qInfo("CPU ops path: %s", cpu::cpu_isa_name(cpu::cpu_isa())); }

  void linear_float_weights_match_double_reference() {
    std::mt19937 rng(1);
    ThreadPool pool(2);
    for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int64_t k : {64, 37, 200}) {  // 37: a partial last group of eight
        const int64_t n = 19, m = 70;    // m > 64 crosses a row block
        std::vector<uint8_t> wb = random_weights(type, n, k, rng);
        const TensorView w = make_view(type, {n, k}, wb.data());
        const std::vector<float> wf = dequantized(w);
        const std::vector<float> x = randn(static_cast<size_t>(m * k), rng);
        const std::vector<float> bias = randn(static_cast<size_t>(n), rng);
        std::vector<float> y(static_cast<size_t>(m * n));
        cpu::linear(x.data(), m, w, bias.data(), y.data(), pool);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double ref = bias[j], mag = std::abs(bias[j]);
            for (int64_t t = 0; t < k; ++t) {
              ref += static_cast<double>(x[i * k + t]) * wf[j * k + t];
              mag += std::abs(static_cast<double>(x[i * k + t]) * wf[j * k + t]);
            }
            QVERIFY2(std::abs(y[i * n + j] - ref) <= 1e-6 * mag + 1e-7,
                     qPrintable(QString("%1 k=%2 y[%3,%4]=%5 ref=%6")
                                    .arg(QString::fromLatin1(dtype_name(type).data()))
                                    .arg(k)
                                    .arg(i)
                                    .arg(j)
                                    .arg(y[i * n + j])
                                    .arg(ref)));
          }
      }
    }
  }

  void quantized_linear_matches_dequantize_row_and_naive_dot() {
    std::mt19937 rng(2);
    ThreadPool pool(2);
    for (DType type : kAllWeightTypes) {
      const int64_t k = dtype_info(type).block_size == 256 ? 512 : 96;
      const int64_t n = 21, m = 5;
      std::vector<uint8_t> wb = random_weights(type, n, k, rng);
      const TensorView w = make_view(type, {n, k}, wb.data());
      const std::vector<float> wf = dequantized(w);
      const std::vector<float> x = randn(static_cast<size_t>(m * k), rng);
      std::vector<float> y(static_cast<size_t>(m * n));
      cpu::linear(x.data(), m, w, nullptr, y.data(), pool);
      double worst = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0, mag = 0;
          for (int64_t t = 0; t < k; ++t) {
            ref += static_cast<double>(x[i * k + t]) * wf[j * k + t];
            mag += std::abs(static_cast<double>(x[i * k + t]) * wf[j * k + t]);
          }
          QVERIFY(mag > 0);
          worst = std::max(worst, std::abs(y[i * n + j] - ref) / mag);
        }
      QVERIFY2(
          worst < 1e-6,
          qPrintable(QString("%1: relative error %2").arg(dtype_name(type).data()).arg(worst)));
    }
  }

  void linear_dequantizes_bit_exactly_like_the_loader() {
    // x = identity picks single weights: y[i, j] = w[j, i] exactly (every other product is 0).
    std::mt19937 rng(3);
    ThreadPool pool(2);
    for (DType type : kAllWeightTypes) {
      const int64_t k = dtype_info(type).block_size == 256 ? 256 : 64;
      const int64_t n = 9;
      std::vector<uint8_t> wb = random_weights(type, n, k, rng);
      const TensorView w = make_view(type, {n, k}, wb.data());
      const std::vector<float> wf = dequantized(w);
      std::vector<float> eye(static_cast<size_t>(k * k), 0.f);
      for (int64_t i = 0; i < k; ++i) eye[i * k + i] = 1.f;
      std::vector<float> y(static_cast<size_t>(k * n));
      cpu::linear(eye.data(), k, w, nullptr, y.data(), pool);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j)
          QVERIFY2(y[i * n + j] == wf[j * k + i] ||
                       (std::isnan(wf[j * k + i]) && std::isnan(y[i * n + j])),
                   qPrintable(QString("%1 w[%2,%3]: %4 vs dequantize_row %5")
                                  .arg(dtype_name(type).data())
                                  .arg(j)
                                  .arg(i)
                                  .arg(y[i * n + j])
                                  .arg(wf[j * k + i])));
    }
  }

  void linear_is_batch_and_thread_invariant() {
    std::mt19937 rng(4);
    ThreadPool one(1), two(2), three(3);
    for (DType type : kAllWeightTypes) {
      const int64_t k = 256, n = 45, m = 70;
      std::vector<uint8_t> wb = random_weights(type, n, k, rng);
      const TensorView w = make_view(type, {n, k}, wb.data());
      const std::vector<float> x = randn(static_cast<size_t>(m * k), rng);
      const std::vector<float> bias = randn(static_cast<size_t>(n), rng);
      std::vector<float> batched(static_cast<size_t>(m * n));
      cpu::linear(x.data(), m, w, bias.data(), batched.data(), two);
      for (ThreadPool* pool : {&one, &two, &three}) {
        std::vector<float> again(batched.size());
        cpu::linear(x.data(), m, w, bias.data(), again.data(), *pool);
        QVERIFY(bitwise_equal(again, batched));
      }
      // Every row alone, and rows in groups of 2 and 3, give the batched row bit for bit.
      for (int64_t group : {1, 2, 3}) {
        for (int64_t i = 0; i + group <= m; i += group) {
          std::vector<float> part(static_cast<size_t>(group * n));
          cpu::linear(x.data() + i * k, group, w, bias.data(), part.data(), three);
          QVERIFY2(
              std::memcmp(part.data(), batched.data() + i * n, part.size() * sizeof(float)) == 0,
              qPrintable(
                  QString("%1: rows %2..%3").arg(dtype_name(type).data()).arg(i).arg(i + group)));
        }
      }
    }
  }

  void linear_group_equals_separate_linears() {
    std::mt19937 rng(5);
    ThreadPool pool(2);
    const int64_t k = 64, m = 4;
    std::vector<uint8_t> a = random_weights(DType::kQ4_1, 24, k, rng),
                         b = random_weights(DType::kQ8_0, 8, k, rng);
    const TensorView wa = make_view(DType::kQ4_1, {24, k}, a.data()),
                     wb = make_view(DType::kQ8_0, {8, k}, b.data());
    const std::vector<float> x = randn(static_cast<size_t>(m * k), rng), bias = randn(8, rng);
    std::vector<float> ra(m * 24), rb(m * 8);
    cpu::linear(x.data(), m, wa, nullptr, ra.data(), pool);
    cpu::linear(x.data(), m, wb, bias.data(), rb.data(), pool);
    // Six items: more than kMaxLinearGroup, so the group is split.
    std::vector<std::vector<float>> ys;
    std::vector<cpu::LinearGroupItem> items;
    const WeightMatrix ma = plain_matrix("a", wa), mb = plain_matrix("b", wb);
    for (int i = 0; i < 6; ++i) ys.emplace_back(i % 2 == 0 ? m * 24 : m * 8);
    for (int i = 0; i < 6; ++i)
      items.push_back(i % 2 == 0 ? cpu::LinearGroupItem{&ma, nullptr, ys[i].data()}
                                 : cpu::LinearGroupItem{&mb, bias.data(), ys[i].data()});
    cpu::linear_group(x.data(), m, items.data(), 6, pool);
    for (int i = 0; i < 6; ++i) QVERIFY(bitwise_equal(ys[i], i % 2 == 0 ? ra : rb));
  }

  void scalar_and_avx2_paths_are_bit_identical() {
    if (cpu::cpu_isa() != cpu::CpuIsa::kAvx2)
      QSKIP("this CPU has no AVX2/FMA/F16C path to compare");
    IsaGuard guard;
    std::mt19937 rng(6);
    ThreadPool pool(2);
    for (DType type : kAllWeightTypes) {
      const int64_t k = dtype_info(type).block_size == 256 ? 256 : 96, n = 13, m = 7;
      std::vector<uint8_t> wb = random_weights(type, n, k, rng);
      const TensorView w = make_view(type, {n, k}, wb.data());
      const std::vector<float> x = randn(static_cast<size_t>(m * k), rng);
      std::vector<float> fast(m * n), slow(m * n);
      cpu::set_cpu_isa(cpu::CpuIsa::kAvx2);
      cpu::linear(x.data(), m, w, nullptr, fast.data(), pool);
      cpu::set_cpu_isa(cpu::CpuIsa::kScalar);
      cpu::linear(x.data(), m, w, nullptr, slow.data(), pool);
      QVERIFY2(bitwise_equal(fast, slow), dtype_name(type).data());
    }
    const std::vector<float> g = randn(1003, rng, 4.f), u = randn(1003, rng);
    std::vector<float> fast(1003), slow(1003);
    cpu::set_cpu_isa(cpu::CpuIsa::kAvx2);
    cpu::swiglu(g.data(), u.data(), fast.data(), 1003);
    cpu::set_cpu_isa(cpu::CpuIsa::kScalar);
    cpu::swiglu(g.data(), u.data(), slow.data(), 1003);
    QVERIFY(bitwise_equal(fast, slow));

    const AttentionCase c{8, 2, 64, 16, {37, 5}, {9, 5}};
    AttentionData d = make_attention(c, rng);
    cpu::set_cpu_isa(cpu::CpuIsa::kAvx2);
    run_attention(c, d, pool);
    const std::vector<float> fast_attn = d.out;
    cpu::set_cpu_isa(cpu::CpuIsa::kScalar);
    run_attention(c, d, pool);
    QVERIFY(bitwise_equal(fast_attn, d.out));
  }

  void embedding_reads_rows_of_any_type() {
    std::mt19937 rng(7);
    for (DType type : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ6_K}) {
      const int64_t vocab = 11, dim = 256;
      std::vector<uint8_t> tb = random_weights(type, vocab, dim, rng);
      const TensorView table = make_view(type, {vocab, dim}, tb.data());
      const std::vector<float> ref = dequantized(table);
      const int32_t ids[4] = {3, 0, 10, 3};
      std::vector<float> out(4 * dim);
      cpu::embedding(table, ids, 4, out.data());
      for (int t = 0; t < 4; ++t)
        QVERIFY(std::memcmp(out.data() + t * dim, ref.data() + ids[t] * dim, dim * sizeof(float)) ==
                0);
    }
  }

  void rms_norm_matches_double_reference() {
    std::mt19937 rng(8);
    const int64_t rows = 5, dim = 576;
    const std::vector<float> x = randn(rows * dim, rng, 3.f), w = randn(dim, rng),
                             delta = randn(rows * dim, rng);
    std::vector<float> out(rows * dim);
    cpu::rms_norm(x.data(), w.data(), rows, dim, 1e-5f, out.data());
    std::vector<float> residual = x, fused(rows * dim);
    cpu::add_rms_norm(residual.data(), delta.data(), w.data(), rows, dim, 1e-5f, fused.data());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0, ss2 = 0;
      for (int64_t i = 0; i < dim; ++i) {
        ss += double(x[r * dim + i]) * x[r * dim + i];
        const double s = double(x[r * dim + i]) + delta[r * dim + i];
        ss2 += s * s;
      }
      const double inv = 1 / std::sqrt(ss / dim + 1e-5), inv2 = 1 / std::sqrt(ss2 / dim + 1e-5);
      for (int64_t i = 0; i < dim; ++i) {
        QVERIFY(std::abs(out[r * dim + i] - x[r * dim + i] * inv * w[i]) < 1e-5);
        QCOMPARE(residual[r * dim + i], x[r * dim + i] + delta[r * dim + i]);
        const double s = double(x[r * dim + i]) + delta[r * dim + i];
        QVERIFY(std::abs(fused[r * dim + i] - s * inv2 * w[i]) < 1e-5);
      }
    }
    // In place (out aliases x) gives the same values.
    std::vector<float> inplace = x;
    cpu::rms_norm(inplace.data(), w.data(), rows, dim, 1e-5f, inplace.data());
    QVERIFY(bitwise_equal(inplace, out));
  }

  void rope_inv_freq_follows_the_scaling_rules() {
    ModelConfig c;
    c.head_dim = 64;
    c.rope_theta = 500000.0;
    std::vector<float> plain = cpu::rope_inv_freq(c);
    QCOMPARE(plain.size(), size_t{32});
    for (int i = 0; i < 32; ++i)
      QVERIFY(std::abs(plain[i] / std::pow(500000.0, -2.0 * i / 64) - 1) < 1e-6);

    c.rope_scaling.type = RopeScalingType::kLinear;
    c.rope_scaling.factor = 4.0;
    std::vector<float> linear = cpu::rope_inv_freq(c);
    for (int i = 0; i < 32; ++i) QVERIFY(std::abs(linear[i] / (plain[i] / 4.0) - 1) < 1e-6);

    // Llama 3.1: factor 8, low 1, high 4, original context 8192.
    c.rope_scaling = {RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192};
    std::vector<float> l3 = cpu::rope_inv_freq(c);
    int kept = 0, divided = 0, smoothed = 0;
    for (int i = 0; i < 32; ++i) {
      const double f = plain[i], wavelen = 2 * M_PI / f;
      double expect;
      if (wavelen < 8192 / 4.0) {
        expect = f, ++kept;
      } else if (wavelen > 8192 / 1.0) {
        expect = f / 8, ++divided;
      } else {
        const double smooth = (8192 / wavelen - 1) / (4 - 1);
        expect = (1 - smooth) * f / 8 + smooth * f, ++smoothed;
      }
      QVERIFY2(std::abs(l3[i] / expect - 1) < 1e-5, qPrintable(QString("band %1").arg(i)));
    }
    QVERIFY(kept > 0 && divided > 0 && smoothed > 0);  // all three bands are exercised

    // GGUF Llama 3.x: the same scaling as per-frequency divisors (rope_freqs.weight), and the CPU
    // agrees with the reference formula the CUDA backend uploads.
    c.rope_scaling = {};
    c.rope_freq_factors.assign(32, 1.0f);
    for (int i = 16; i < 32; ++i) c.rope_freq_factors[i] = 8.0f;
    const std::vector<float> factored = cpu::rope_inv_freq(c);
    const std::vector<float> reference = rope_inverse_frequencies(c);
    for (int i = 0; i < 32; ++i) {
      QVERIFY(std::abs(factored[i] / (plain[i] / c.rope_freq_factors[i]) - 1) < 1e-6);
      QVERIFY(std::abs(factored[i] / reference[i] - 1) < 1e-6);
    }
  }

  void rope_rotates_the_right_pairs() {
    std::mt19937 rng(9);
    const int64_t tokens = 3, heads = 2, hd = 16;
    const int32_t pos[tokens] = {0, 7, 1000};
    ModelConfig c;
    c.head_dim = hd;
    c.rope_theta = 10000.0;
    const std::vector<float> inv = cpu::rope_inv_freq(c);
    const std::vector<float> x = randn(tokens * heads * hd, rng);
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      std::vector<float> y = x;
      cpu::rope(y.data(), pos, tokens, heads, hd, inv, style);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < hd / 2; ++i) {
            const int64_t a = style == RopeStyle::kNeox ? i : 2 * i,
                          b = style == RopeStyle::kNeox ? i + hd / 2 : 2 * i + 1;
            const double angle = static_cast<double>(static_cast<float>(pos[t]) * inv[i]);
            const float* xv = x.data() + (t * heads + h) * hd;
            const float* yv = y.data() + (t * heads + h) * hd;
            QVERIFY(std::abs(yv[a] - (xv[a] * std::cos(angle) - xv[b] * std::sin(angle))) < 1e-5);
            QVERIFY(std::abs(yv[b] - (xv[b] * std::cos(angle) + xv[a] * std::sin(angle))) < 1e-5);
          }
      if (style == RopeStyle::kNeox)
        QVERIFY(std::memcmp(y.data(), x.data(), heads * hd * sizeof(float)) == 0);
    }
  }

  void swiglu_matches_reference() {
    std::mt19937 rng(10);
    std::vector<float> g = randn(1000, rng, 5.f), u = randn(1000, rng);
    g[0] = -100.f;  // exp overflow side
    g[1] = 100.f;
    std::vector<float> out(1000);
    cpu::swiglu(g.data(), u.data(), out.data(), 1000);
    for (int i = 0; i < 1000; ++i) {
      const double ref = g[i] / (1 + std::exp(-double(g[i]))) * u[i];
      QVERIFY2(std::abs(out[i] - ref) <= 2e-6 * std::abs(ref) + 1e-30,
               qPrintable(QString::number(i)));
    }
  }

  void write_kv_fills_slots_and_skips_padding() {
    const int64_t kvh = 2, hd = 4, row = kvh * hd;
    std::vector<float> kc(4 * 2 * row, -1.f), vc(4 * 2 * row, -1.f);
    cpu::KvLayerView view{kc.data(), vc.data(), 2, kvh, hd};
    std::vector<float> k(3 * row), v(3 * row);
    std::iota(k.begin(), k.end(), 0.f);
    std::iota(v.begin(), v.end(), 100.f);
    const int64_t slot_ids[3] = {5, -1, 2};
    cpu::write_kv(k.data(), v.data(), slot_ids, 3, view);
    QCOMPARE(kc[5 * row], 0.f);
    QCOMPARE(vc[5 * row + row - 1], 100.f + row - 1);
    QCOMPARE(kc[2 * row], 2.f * row);
    int untouched = 0;
    for (float f : kc) untouched += f == -1.f;
    QCOMPARE(untouched, int(kc.size() - 2 * row));
  }

  void paged_attention_matches_reference() {
    std::mt19937 rng(11);
    ThreadPool pool(2);
    const AttentionCase cases[] = {
        {4, 4, 64, 16, {1, 17, 40}, {1, 1, 1}},  // decode, GQA 1
        {8, 2, 64, 16, {33, 20}, {33, 7}},       // prefill + a chunk starting mid-sequence, GQA 4
        {8, 1, 128, 4, {50}, {13}},              // GQA 8, head_dim 128, small blocks
        {6, 3, 16, 16, {29, 3}, {29, 2}},        // small head_dim
        {4, 2, 64, 16, {30, 12}, {11, 12}, 8},   // sliding window
        {2, 1, 24, 8, {19}, {19}},               // head_dim 24
        {2, 1, 20, 8, {19}, {6}},                // head_dim not a multiple of 8
    };
    for (const AttentionCase& c : cases) {
      AttentionData d = make_attention(c, rng);
      run_attention(c, d, pool);
      const double err = attention_error(c, d);
      QVERIFY2(err < 2e-5, qPrintable(QString("heads %1/%2 hd %3: max error %4")
                                          .arg(c.num_heads)
                                          .arg(c.num_kv_heads)
                                          .arg(c.head_dim)
                                          .arg(err)));
    }
  }

  void paged_attention_is_batch_and_thread_invariant() {
    std::mt19937 rng(12);
    ThreadPool one(1), three(3);
    const AttentionCase both{8, 2, 64, 16, {45, 21}, {13, 1}};
    AttentionData d = make_attention(both, rng);
    run_attention(both, d, three);
    const std::vector<float> batched = d.out;
    run_attention(both, d, one);
    QVERIFY(bitwise_equal(d.out, batched));
    // The second sequence alone: same cache, one-row block table, its query rows only.
    AttentionData alone = d;
    alone.seq_lens = {21};
    alone.query_start = {0, 1};
    alone.block_tables.assign(d.block_tables.begin() + d.max_blocks, d.block_tables.end());
    const int64_t row = both.num_heads * both.head_dim;
    alone.q.assign(d.q.begin() + 13 * row, d.q.end());
    alone.out.assign(row, 0.f);
    run_attention(both, alone, one);
    QVERIFY(std::memcmp(alone.out.data(), batched.data() + 13 * row, row * sizeof(float)) == 0);
  }
};

QTEST_GUILESS_MAIN(CpuOpsTest)
#include "cpu_ops_test.moc"
