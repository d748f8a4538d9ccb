// The host-side decisions of the CUDA CalibOps (engine/backend/cuda/calib_plan.h, calib_grid.h)
// against the CPU's GPTQ (engine/quant/gptq.h, int_quant.h): no GPU needed, so it runs in CI.
//   - the column plan: dead columns and the act-order permutation (ties among equal diagonals)
//     give gptq_quantize's g_idx and dead-column count;
//   - the damping schedule and the fallback text: a Hessian that no damping makes positive
//     definite gives gptq_quantize's fallback reason word for word;
//   - the host build of calib_grid.h (the GPTQ kernel's grid) equals int_quant.h bit for bit;
//   - how pieces are cut: GPTQ column pieces, rows of mlp_act's up projection.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cuda/calib_grid.h"
#include "engine/backend/cuda/calib_plan.h"
#include "engine/quant/gptq.h"
#include "engine/quant/int_quant.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::cuda;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A symmetric positive definite k x k Hessian whose diagonal has ties (columns share values) and
// zeros at `dead` (with their rows and columns).
std::vector<double> hessian_with_ties(int64_t k, const std::vector<int64_t>& dead, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-0.1, 0.1);
  std::vector<double> h(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < i; ++j) h[i * k + j] = h[j * k + i] = u(rng) / static_cast<double>(k);
  for (int64_t i = 0; i < k; ++i) h[i * k + i] = 1.0 + static_cast<double>((i * 7) % 5);  // ties
  for (int64_t d : dead)
    for (int64_t t = 0; t < k; ++t) h[d * k + t] = h[t * k + d] = 0.0;
  return h;
}

}  // namespace

class CudaCalibPlanTest : public QObject {
  Q_OBJECT

 private slots:
  void column_plan_matches_gptq() {
    const int64_t k = 96, rows = 4;
    const std::vector<int64_t> dead = {3, 50};
    const std::vector<double> h = hessian_with_ties(k, dead, 7);
    std::vector<float> w(static_cast<size_t>(rows * k));
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i));
    for (bool act_order : {false, true}) {
      GptqConfig c;
      c.quant.group_size = 8;  // small groups: g_idx shows the order of nearly every column
      c.act_order = act_order;
      Result<GptqResult> cpu = gptq_quantize(w.data(), rows, k, h, c);
      LATHE_QVERIFY_RESULT(cpu);
      const GptqColumnPlan plan = plan_gptq_columns(h, k, act_order);
      QCOMPARE(plan.dead_columns, cpu->dead_columns);
      QCOMPARE(plan.dead_columns, static_cast<int64_t>(dead.size()));
      for (int64_t d : dead) QCOMPARE(plan.dead[static_cast<size_t>(d)], uint8_t{1});
      QVERIFY(gptq_group_index(plan.perm, c.quant.group_size) == cpu->q.g_idx);
      // The order itself: descending fixed diagonal, ties in column order.
      for (int64_t i = 1; i < k; ++i) {
        const int32_t a = plan.perm[static_cast<size_t>(i - 1)],
                      b = plan.perm[static_cast<size_t>(i)];
        if (!act_order) {
          QCOMPARE(b, a + 1);
          continue;
        }
        const double da = plan.dead[a] ? 1.0 : h[a * k + a], db = plan.dead[b] ? 1.0 : h[b * k + b];
        QVERIFY(da > db || (da == db && a < b));
      }
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += plan.dead[static_cast<size_t>(j)] ? 1.0 : h[j * k + j];
      QVERIFY(std::fabs(plan.mean_diag - sum / static_cast<double>(k)) < 1e-12);
    }
  }

  void fallback_reason_matches_gptq() {
    // A diagonal Hessian with one negative entry: the factorization fails at that column whatever
    // the damping, with the pivot value h_cc + damp * mean (no other terms), so the CPU's text can
    // be predicted exactly from the schedule.
    const int64_t k = 16, c_bad = 5;
    std::vector<double> h(static_cast<size_t>(k * k), 0.0);
    for (int64_t i = 0; i < k; ++i) h[i * k + i] = 2.0 + 0.25 * static_cast<double>(i);
    h[c_bad * k + c_bad] = -40.0;
    std::vector<float> w(static_cast<size_t>(2 * k), 0.5f);
    struct Case {
      bool act_order;
      double increment;
      int retries;
      double max_damp;
    };
    for (const Case& cs : {Case{false, 0.0015, 40, 1.0}, Case{true, 0.0015, 40, 1.0},
                           Case{false, 0.1, 100, 0.35}, Case{false, 0.0, 40, 1.0}}) {
      GptqConfig c;
      c.quant.group_size = 8;
      c.act_order = cs.act_order;
      c.damp_increment = cs.increment;
      c.max_damp_retries = cs.retries;
      c.max_damp_percent = cs.max_damp;
      Result<GptqResult> cpu = gptq_quantize(w.data(), 2, k, h, c);
      LATHE_QVERIFY_RESULT(cpu);
      QVERIFY(cpu->fell_back_to_rtn);
      const GptqColumnPlan plan = plan_gptq_columns(h, k, c.act_order);
      double damp = c.damp_percent;
      int attempt = 0;
      for (;; ++attempt) {
        const std::optional<double> next = gptq_next_damp(c, attempt, damp);
        if (!next) break;
        damp = *next;
      }
      int64_t pos = 0;  // the bad column's processing position; the reversed matrix's pivot
      while (plan.perm[static_cast<size_t>(pos)] != c_bad) ++pos;
      const double pivot_value = h[c_bad * k + c_bad] + damp * plan.mean_diag;
      const std::string want =
          gptq_fallback_reason(c, damp, not_positive_definite_message(k - 1 - pos, k, pivot_value));
      QCOMPARE(QString::fromStdString(cpu->fallback_reason), QString::fromStdString(want));
      QCOMPARE(cpu->damp_percent_used, damp);
    }
  }

  void grid_matches_int_quant() {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> mag(-30.f, 20.f), unit(0.f, 1.f);
    auto random_value = [&]() {
      const float v = std::exp2(mag(rng)) * (unit(rng) < 0.5f ? -1.f : 1.f);
      const float pick = unit(rng);
      return pick < 0.05f ? 0.f : (pick < 0.08f ? -0.f : v);
    };
    int64_t checked = 0;
    for (int bits : {4, 8})
      for (bool sym : {true, false})
        for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
          for (int min_zero : {0, 1}) {
            IntQuantConfig c;
            c.bits = bits;
            c.symmetric = sym;
            c.scale_dtype = dt;
            c.min_zero = min_zero;
            const CalibGrid g = cuda::calib_grid_of(c);
            const int32_t max_code = (1 << bits) - 1;
            for (int t = 0; t < 2000; ++t) {
              float lo = random_value(), hi = random_value();
              if (hi < lo) std::swap(lo, hi);
              if (t % 97 == 0) lo = hi = 0.f;
              const IntGroupParams want = int_grid_params(lo, hi, c);
              const CalibGroupParams got = calib_grid_params(lo, hi, g);
              QCOMPARE(bits_of(got.scale), bits_of(want.scale));
              QCOMPARE(got.zero, want.zero);
              for (int e = 0; e < 8; ++e) {
                // Values in and around the range, and exact half steps (ties to even).
                float x = lo + (hi - lo) * unit(rng) * 1.2f - (hi - lo) * 0.1f;
                if (e == 0) x = want.scale * (static_cast<float>(e + t % 7) + 0.5f);
                const int32_t code = calib_code(x, got, max_code);
                QCOMPARE(code, int_code(x, want, max_code));
                QCOMPARE(bits_of(calib_value(code, got)), bits_of(int_value(code, want)));
                ++checked;
              }
            }
          }
    QVERIFY(checked > 0);
  }

  void gptq_pieces() {
    // Block no wider than a piece: one piece.
    QCOMPARE(gptq_piece_end(0, 128, 32, 128), int64_t{128});
    QCOMPARE(gptq_piece_end(256, 320, 64, 128), int64_t{320});
    // A wide block in pieces of 128 where groups do not straddle piece ends.
    QCOMPARE(gptq_piece_end(0, 512, 128, 128), int64_t{128});
    QCOMPARE(gptq_piece_end(0, 512, 32, 128), int64_t{128});
    QCOMPARE(gptq_piece_end(0, 512, 256, 128), int64_t{128});  // group starts at the piece
    QCOMPARE(gptq_piece_end(0, 512, 512, 128), int64_t{128});  // per channel
    // A group of 96 starting at 96 would straddle 128 inside the block: the piece ends at 96.
    QCOMPARE(gptq_piece_end(0, 256, 96, 128), int64_t{96});
    QCOMPARE(gptq_piece_end(96, 256, 96, 128), int64_t{192});
    QCOMPARE(gptq_piece_end(192, 256, 96, 128), int64_t{256});
    // Walking a block always makes progress and covers it exactly.
    for (int64_t g : {1, 3, 32, 48, 96, 100, 128, 200, 384})
      for (int64_t bs : {1, 64, 128, 200, 256, 384}) {
        const int64_t k = 384 * 5;
        for (int64_t i1 = 0; i1 < k; i1 += bs) {
          const int64_t i2 = std::min(i1 + bs, k);
          int64_t s1 = i1;
          while (s1 < i2) {
            const int64_t s2 = gptq_piece_end(s1, i2, g, 128);
            QVERIFY(s2 > s1 && s2 <= i2 && s2 - s1 <= 128);
            // No group starting inside (s1, s2) reaches past s2 while s2 < i2.
            for (int64_t j = s1 + 1; j < s2; ++j)
              if (j % g == 0 && s2 < i2) QVERIFY(j + g <= s2);
            s1 = s2;
          }
        }
      }
  }

  void chunk_rows() {
    QCOMPARE(plan_chunk_rows(0, 100, 1000), int64_t{0});
    QCOMPARE(plan_chunk_rows(50, 100, 1000), int64_t{10});
    QCOMPARE(plan_chunk_rows(5, 100, 1000), int64_t{5});
    QCOMPARE(plan_chunk_rows(5, 100, 50), int64_t{0});
  }
};

QTEST_GUILESS_MAIN(CudaCalibPlanTest)
#include "cuda_calib_plan_test.moc"
