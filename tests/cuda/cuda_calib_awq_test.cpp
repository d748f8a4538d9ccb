// AWQ's searches on the GPU (engine/backend/cuda/calib_awq.h) against the CPU (awq_search.h) on
// random data:
//   awq_fake_quantize == awq_fake_quantize_scaled bit for bit (no mismatch allowed: the kernel does
//   the CPU's float operations in its order, IEEE-rounded);
//   awq_clip_search == awq_search_clip: identical ranges (the errors are the CPU's doubles bit for
//   bit too); a different choice passes only where the two candidates' CPU errors tie within 1e-12
//   relative, and those are counted in the QINFO line.
// Configs: symmetric and asymmetric, 4 and 8 bits, groups 128, 64, 32 and -1 (per channel, with
// column tiles and a k % 4 tail), f32 / f16 / bf16 scales, min_zero 1, 1 / 128 / 300 tokens, more
// than ten clip steps. A QINFO line times the 8B-sized clip search (14336 x 4096, 128 tokens, group
// 128) and fake quantization, and the first 64 rows of both are checked against the CPU.
#include <QtTest>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend/cuda/calib_awq.h"
#include "engine/backend/cuda/calib_plan.h"
#include "engine/quant/awq_search.h"
#include "engine/quant/int_quant.h"

using namespace lathe;
using namespace lathe::test;
using lathe::cuda::CalibGrid;

namespace {

IntQuantConfig quant(int bits, int64_t group, bool symmetric, DType scale_dtype, int min_zero = 0) {
  IntQuantConfig q;
  q.bits = bits;
  q.group_size = group;
  q.symmetric = symmetric;
  q.scale_dtype = scale_dtype;
  q.min_zero = min_zero;
  return q;
}

// Weights ~ N(0, 0.02) with a few outliers per row (every 37th column x 8), so clipping matters.
std::vector<float> make_weights(int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 0.02f);
  std::vector<float> w(static_cast<size_t>(rows * k));
  for (int64_t i = 0; i < rows * k; ++i)
    w[static_cast<size_t>(i)] = n(rng) * ((i % k) % 37 == 5 ? 8.f : 1.f);
  return w;
}

// Activations ~ N(0, 1) with uneven channels (1 .. 7) and a few large ones (x 20).
std::vector<float> make_activations(int64_t tokens, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(tokens * k));
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int64_t j = i % k;
    x[static_cast<size_t>(i)] =
        n(rng) * static_cast<float>(1 + j % 7) * (j % 101 == 3 ? 20.f : 1.f);
  }
  return x;
}

// AWQ-like scales: exp(U(-1.5, 1.5)).
std::vector<float> make_scales(int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> s(static_cast<size_t>(k));
  for (float& v : s) v = std::exp(u(rng));
  return s;
}

// Elements whose bits differ.
int64_t bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n + static_cast<int64_t>(a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

// The CPU search's error of one clipping range of group gi of row wr (awq_search.h's pieces; the
// search itself returns the winner only), for the tie check.
double clip_error(const float* wr, const float* x, int64_t k, int64_t g, int64_t gi, int64_t tokens,
                  float mv, const IntQuantConfig& q) {
  std::vector<double> org(static_cast<size_t>(tokens));
  std::vector<float> qw(static_cast<size_t>(g));
  awq_group_dots(wr + gi * g, g, x + gi * g, k, tokens, org.data());
  return awq_clip_range_error(wr + gi * g, g, x + gi * g, k, tokens, org.data(), mv, q, qw.data());
}

struct ClipCompare {
  int64_t differ = 0;  // ranges that differ and do not tie
  int64_t ties = 0;    // ranges that differ where the two CPU errors tie within 1e-12
};

ClipCompare compare_clip(const std::vector<float>& gpu, const std::vector<float>& cpu,
                         const std::vector<float>& w, const std::vector<float>& x, int64_t rows,
                         int64_t k, int64_t tokens, const IntQuantConfig& q) {
  ClipCompare c;
  const int64_t g = effective_group_size(q, k), ng = k / g;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t gi = 0; gi < ng; ++gi) {
      const size_t i = static_cast<size_t>(r * ng + gi);
      if (std::memcmp(&gpu[i], &cpu[i], sizeof(float)) == 0) continue;
      const double a = clip_error(w.data() + r * k, x.data(), k, g, gi, tokens, gpu[i], q);
      const double b = clip_error(w.data() + r * k, x.data(), k, g, gi, tokens, cpu[i], q);
      if (std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)))
        ++c.ties;
      else
        ++c.differ;
    }
  return c;
}

// The GPU's fake quantization of w [rows, k] (host in, host out).
std::vector<float> gpu_fake_quantize(const std::vector<float>& w, const std::vector<float>& s,
                                     int64_t rows, int64_t k, const IntQuantConfig& q) {
  const Dev dw = Dev::from(w), ds = Dev::from(s);
  const Dev dout = Dev::poisoned(static_cast<int64_t>(w.size() * sizeof(float)));
  const Status st = cuda::awq_fake_quantize(dw.as<float>(), ds.as<float>(), rows, k, q.group_size,
                                            cuda::calib_grid_of(q), dout.as<float>(), nullptr);
  if (!st.is_ok()) qFatal("awq_fake_quantize: %s", st.message().c_str());
  if (cudaDeviceSynchronize() != cudaSuccess) qFatal("awq_fake_quantize failed on the device");
  return dout.download<float>(w.size());
}

std::vector<float> gpu_clip(const std::vector<float>& w, const std::vector<float>& x, int64_t rows,
                            int64_t k, int64_t tokens, const AwqConfig& c) {
  const int64_t ng = k / effective_group_size(c.quant, k);
  const Dev dw = Dev::from(w), dx = Dev::from(x);
  const Dev dbest = Dev::poisoned(rows * ng * static_cast<int64_t>(sizeof(float)));
  const int steps = static_cast<int>(c.max_shrink * c.clip_grid);
  const Status st = cuda::awq_clip_search(dw.as<float>(), rows, k, dx.as<float>(), tokens,
                                          c.quant.group_size, cuda::calib_grid_of(c.quant),
                                          c.clip_grid, steps, dbest.as<float>(), nullptr);
  if (!st.is_ok()) qFatal("awq_clip_search: %s", st.message().c_str());
  if (cudaDeviceSynchronize() != cudaSuccess) qFatal("awq_clip_search failed on the device");
  return dbest.download<float>(static_cast<size_t>(rows * ng));
}

struct Case {
  const char* name;
  int64_t rows, k, tokens;
  IntQuantConfig q;
  int clip_grid = 20;
};

std::vector<Case> cases() {
  return {
      {"4-bit g128 asym f16 (AutoAWQ)", 64, 512, 128, quant(4, 128, false, DType::kF16)},
      {"4-bit g128 sym f32, 300 tokens", 48, 384, 300, quant(4, 128, true, DType::kF32)},
      {"8-bit g64 asym bf16 min_zero 1, 1 token", 40, 256, 1, quant(8, 64, false, DType::kBF16, 1)},
      {"4-bit g32 asym f32, k 96", 50, 96, 128, quant(4, 32, false, DType::kF32)},
      {"8-bit per-channel sym f16, k 384 (column tiles)", 30, 384, 128,
       quant(8, -1, true, DType::kF16)},
      {"4-bit per-channel asym f32, k 1003 (tiles, tail 3)", 20, 1003, 300,
       quant(4, -1, false, DType::kF32)},
      {"4-bit per-channel asym f16, k 130 (tail 2)", 33, 130, 128,
       quant(4, -1, false, DType::kF16)},
      {"4-bit g128 asym f16, 700 rows (several per CTA)", 700, 256, 128,
       quant(4, 128, false, DType::kF16)},
      {"4-bit g64 sym bf16, 25 clip steps", 24, 128, 128, quant(4, 64, true, DType::kBF16), 50},
  };
}

}  // namespace

class CudaCalibAwqTest : public QObject {
  Q_OBJECT

 private slots:
  void bad_arguments_are_refused() {
    // Checked before any device call: runs without a GPU.
    const IntQuantConfig q = quant(4, 128, false, DType::kF16);
    float* none = nullptr;
    Status st =
        cuda::awq_fake_quantize(none, none, 4, 200, 128, cuda::calib_grid_of(q), none, nullptr);
    QCOMPARE(st.code(), ErrorCode::kInvalidArgument);
    st = cuda::awq_clip_search(none, 4, 256, none, 0, 128, cuda::calib_grid_of(q), 20, 10, none,
                               nullptr);
    QCOMPARE(st.code(), ErrorCode::kInvalidArgument);
    CalibGrid bad = cuda::calib_grid_of(q);
    bad.bits = 3;
    st = cuda::awq_clip_search(none, 4, 256, none, 8, 128, bad, 20, 10, none, nullptr);
    QCOMPARE(st.code(), ErrorCode::kInvalidArgument);
  }

  void fake_quantize_matches_cpu() {
    LATHE_REQUIRE_GPU();
    uint32_t seed = 1;
    for (const Case& c : cases()) {
      const std::vector<float> w = make_weights(c.rows, c.k, seed++);
      const std::vector<float> s = make_scales(c.k, seed++);
      Result<std::vector<float>> cpu = awq_fake_quantize_scaled(w.data(), c.rows, c.k, s, c.q);
      LATHE_QVERIFY_RESULT(cpu);
      const std::vector<float> gpu = gpu_fake_quantize(w, s, c.rows, c.k, c.q);
      const int64_t bad = bit_mismatches(gpu, *cpu);
      QVERIFY2(
          bad == 0,
          qPrintable(QString("%1: %2 of %3 values differ").arg(c.name).arg(bad).arg(cpu->size())));
    }
  }

  void fake_quantize_in_place() {
    LATHE_REQUIRE_GPU();
    const IntQuantConfig q = quant(4, 128, false, DType::kF16);
    const int64_t rows = 16, k = 256;
    const std::vector<float> w = make_weights(rows, k, 77), s = make_scales(k, 78);
    Result<std::vector<float>> cpu = awq_fake_quantize_scaled(w.data(), rows, k, s, q);
    LATHE_QVERIFY_RESULT(cpu);
    const Dev dw = Dev::from(w), ds = Dev::from(s);
    LATHE_QVERIFY_OK(cuda::awq_fake_quantize(dw.as<float>(), ds.as<float>(), rows, k, 128,
                                             cuda::calib_grid_of(q), dw.as<float>(), nullptr));
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
    QCOMPARE(bit_mismatches(dw.download<float>(w.size()), *cpu), int64_t{0});
  }

  void clip_search_matches_cpu() {
    LATHE_REQUIRE_GPU();
    uint32_t seed = 100;
    QString report;
    for (const Case& c : cases()) {
      const std::vector<float> w = make_weights(c.rows, c.k, seed++);
      const std::vector<float> x = make_activations(c.tokens, c.k, seed++);
      AwqConfig config;
      config.quant = c.q;
      config.clip_grid = c.clip_grid;
      Result<std::vector<float>> cpu =
          awq_search_clip(w.data(), c.rows, c.k, x.data(), c.tokens, config);
      LATHE_QVERIFY_RESULT(cpu);
      const std::vector<float> gpu = gpu_clip(w, x, c.rows, c.k, c.tokens, config);
      QCOMPARE(gpu.size(), cpu->size());
      const ClipCompare cmp = compare_clip(gpu, *cpu, w, x, c.rows, c.k, c.tokens, c.q);
      QVERIFY2(cmp.differ == 0, qPrintable(QString("%1: %2 of %3 ranges differ (%4 ties)")
                                               .arg(c.name)
                                               .arg(cmp.differ)
                                               .arg(cpu->size())
                                               .arg(cmp.ties)));
      report += QString(" %1: %2 ties;").arg(c.name).arg(cmp.ties);
    }
    qInfo("AWQ clip search vs CPU:%s", qPrintable(report));
  }

  void clip_search_shrinks_ranges() {
    // The data above must make the search choose shrunk ranges, or agreeing on amax proves little.
    LATHE_REQUIRE_GPU();
    const Case c = cases()[0];
    const std::vector<float> w = make_weights(c.rows, c.k, 100);
    const std::vector<float> x = make_activations(c.tokens, c.k, 101);
    AwqConfig config;
    config.quant = c.q;
    const std::vector<float> gpu = gpu_clip(w, x, c.rows, c.k, c.tokens, config);
    const int64_t g = effective_group_size(c.q, c.k), ng = c.k / g;
    int64_t shrunk = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t gi = 0; gi < ng; ++gi) {
        float amax = 0.f;
        for (int64_t j = 0; j < g; ++j)
          amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * c.k + gi * g + j)]));
        shrunk += gpu[static_cast<size_t>(r * ng + gi)] < amax;
      }
    QVERIFY2(shrunk > 0 && shrunk < c.rows * ng,
             qPrintable(QString("%1 of %2 ranges shrunk").arg(shrunk).arg(c.rows * ng)));
  }

  void timing_8b() {
    LATHE_REQUIRE_GPU();
    const int64_t rows = 14336, k = 4096, tokens = 128, check_rows = 64;
    const IntQuantConfig q = quant(4, 128, false, DType::kF16);
    AwqConfig config;
    config.quant = q;
    const std::vector<float> w = fast_random(static_cast<size_t>(rows * k), 1, 0.05f);
    const std::vector<float> x = fast_random(static_cast<size_t>(tokens * k), 2, 3.f);
    const std::vector<float> s = make_scales(k, 3);
    const int64_t ng = k / 128;
    const Dev dw = Dev::from(w), dx = Dev::from(x), ds = Dev::from(s);
    const Dev dbest = Dev::poisoned(rows * ng * static_cast<int64_t>(sizeof(float)));
    const Dev dout = Dev::poisoned(rows * k * static_cast<int64_t>(sizeof(float)));
    cudaEvent_t e0, e1;
    LATHE_CUDA_CHECK(cudaEventCreate(&e0));
    LATHE_CUDA_CHECK(cudaEventCreate(&e1));
    float clip_ms = 0.f, fq_ms = 0.f;
    for (int rep = 0; rep < 2; ++rep) {  // the first run warms up
      LATHE_CUDA_CHECK(cudaEventRecord(e0, nullptr));
      LATHE_QVERIFY_OK(cuda::awq_clip_search(dw.as<float>(), rows, k, dx.as<float>(), tokens, 128,
                                             cuda::calib_grid_of(q), 20, 10, dbest.as<float>(),
                                             nullptr));
      LATHE_CUDA_CHECK(cudaEventRecord(e1, nullptr));
      LATHE_CUDA_CHECK(cudaEventSynchronize(e1));
      LATHE_CUDA_CHECK(cudaEventElapsedTime(&clip_ms, e0, e1));
      LATHE_CUDA_CHECK(cudaEventRecord(e0, nullptr));
      LATHE_QVERIFY_OK(cuda::awq_fake_quantize(dw.as<float>(), ds.as<float>(), rows, k, 128,
                                               cuda::calib_grid_of(q), dout.as<float>(), nullptr));
      LATHE_CUDA_CHECK(cudaEventRecord(e1, nullptr));
      LATHE_CUDA_CHECK(cudaEventSynchronize(e1));
      LATHE_CUDA_CHECK(cudaEventElapsedTime(&fq_ms, e0, e1));
    }
    // The per-channel clip search (column tiles, x reloaded per row) on the same matrix.
    float clip_pc_ms = 0.f;
    const Dev dbest_pc = Dev::poisoned(rows * static_cast<int64_t>(sizeof(float)));
    LATHE_CUDA_CHECK(cudaEventRecord(e0, nullptr));
    LATHE_QVERIFY_OK(cuda::awq_clip_search(dw.as<float>(), rows, k, dx.as<float>(), tokens, -1,
                                           cuda::calib_grid_of(q), 20, 10, dbest_pc.as<float>(),
                                           nullptr));
    LATHE_CUDA_CHECK(cudaEventRecord(e1, nullptr));
    LATHE_CUDA_CHECK(cudaEventSynchronize(e1));
    LATHE_CUDA_CHECK(cudaEventElapsedTime(&clip_pc_ms, e0, e1));
    LATHE_CUDA_CHECK(cudaEventDestroy(e0));
    LATHE_CUDA_CHECK(cudaEventDestroy(e1));
    qInfo(
        "AWQ on 8B-sized inputs (4-bit asym f16): clip search [%lld, %lld] x %lld tokens "
        "(10 steps) %.3f ms with group 128, %.3f ms per channel; fake quantize [%lld, %lld] "
        "group 128 %.3f ms",
        static_cast<long long>(rows), static_cast<long long>(k), static_cast<long long>(tokens),
        clip_ms, clip_pc_ms, static_cast<long long>(rows), static_cast<long long>(k), fq_ms);

    // The first rows against the CPU (rows are independent).
    const std::vector<float> best = dbest.download<float>(static_cast<size_t>(rows * ng));
    const std::vector<float> head(w.begin(), w.begin() + check_rows * k);
    Result<std::vector<float>> cpu_clip =
        awq_search_clip(head.data(), check_rows, k, x.data(), tokens, config);
    LATHE_QVERIFY_RESULT(cpu_clip);
    const std::vector<float> best_head(best.begin(), best.begin() + check_rows * ng);
    const ClipCompare cmp = compare_clip(best_head, *cpu_clip, head, x, check_rows, k, tokens, q);
    QVERIFY2(cmp.differ == 0, qPrintable(QString("8B clip: %1 ranges differ").arg(cmp.differ)));
    Result<std::vector<float>> cpu_fq = awq_fake_quantize_scaled(head.data(), check_rows, k, s, q);
    LATHE_QVERIFY_RESULT(cpu_fq);
    std::vector<float> out = dout.download<float>(static_cast<size_t>(check_rows * k));
    QCOMPARE(bit_mismatches(out, *cpu_fq), int64_t{0});
  }
};

QTEST_GUILESS_MAIN(CudaCalibAwqTest)
#include "cuda_calib_awq_test.moc"
