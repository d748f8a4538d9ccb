// The sampler (engine/runtime/sampler.h): every knob changes the distribution as specified —
// empirical frequencies over many seeds against the exact renormalized distribution — plus greedy
// ties, reproducible seeds, penalty arithmetic, logprobs, edge cases, and token-for-token agreement
// with a plain re-implementation of the written contract (what the CUDA sampler must also match).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/core/philox.h"
#include "engine/runtime/sampler.h"
#include "test_support.h"

using namespace lathe;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SampledToken sample(std::vector<float> logits, const SamplingRow& row) {
  return sample_token(logits.data(), static_cast<int64_t>(logits.size()), row);
}

SamplingRow random_row(float temperature = 1.f) {
  SamplingRow r;
  r.temperature = temperature;
  return r;
}

// Exact distribution after temperature, top-k, top-p and min-p, computed in double with a full
// sort.
std::vector<double> expected_distribution(const std::vector<float>& logits,
                                          const SamplingRow& row) {
  const size_t n = logits.size();
  std::vector<double> p(n);
  double mx = -1e300;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, double(logits[i]) / row.temperature);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (p[i] = std::exp(double(logits[i]) / row.temperature - mx));
  for (double& v : p) v /= sum;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<bool> keep(n, true);
  size_t k = row.top_k > 0 ? std::min<size_t>(row.top_k, n) : n;
  for (size_t r = k; r < n; ++r) keep[order[r]] = false;
  if (row.top_p < 1.f) {
    double total = 0, mass = 0;
    for (size_t r = 0; r < k; ++r) total += p[order[r]];
    for (size_t r = 0; r < k; ++r) {
      if (mass >= row.top_p * total) keep[order[r]] = false;
      mass += p[order[r]];
    }
  }
  const double pmax = p[order[0]];
  std::vector<double> q(n, 0.0);
  double kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (keep[i] && p[i] >= row.min_p * pmax) kept += (q[i] = p[i]);
  for (double& v : q) v /= kept;
  return q;
}

// Draws `draws` tokens with seeds 0..draws-1 and checks every token's frequency against `expected`
// within 5 standard deviations (plus a little slack); tokens with probability 0 must never appear.
void check_frequencies(const std::vector<float>& logits, SamplingRow row,
                       const std::vector<double>& expected, int draws = 20000) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    row.seed = static_cast<uint64_t>(i) * 7919u + 17u;
    row.step = static_cast<uint64_t>(i % 13);
    const SampledToken t = sample(logits, row);
    QVERIFY(t.token >= 0 && t.token < static_cast<int32_t>(logits.size()));
    ++counts[t.token];
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    const double f = double(counts[i]) / draws, p = expected[i];
    if (p == 0) {
      QVERIFY2(
          counts[i] == 0,
          qPrintable(
              QString("token %1 has probability 0 but was drawn %2 times").arg(i).arg(counts[i])));
      continue;
    }
    const double bound = 5 * std::sqrt(p * (1 - p) / draws) + 1e-3;
    QVERIFY2(std::abs(f - p) <= bound,
             qPrintable(QString("token %1: frequency %2, expected %3 (bound %4)")
                            .arg(i)
                            .arg(f)
                            .arg(p)
                            .arg(bound)));
  }
}

// The contract of sampler.h written out plainly (full sort, no shortcuts), for token-level
// agreement.
int32_t contract_sample(std::vector<float> l, const SamplingRow& row) {
  const int64_t n = static_cast<int64_t>(l.size());
  for (int32_t t : row.banned_tokens) l[t] = -kInf;
  std::vector<float> z(n), p(n);
  float m = -kInf;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, z[i] = l[i] / row.temperature);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (p[i] = std::exp(z[i] - m));
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(double(p[i]) / s);
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  if (row.top_k > 0 && row.top_k < n) ids.resize(row.top_k);
  if (row.top_p < 1.f) {
    double total = 0, mass = 0;
    for (int32_t i : ids) total += p[i];
    size_t r = 0;
    while (r < ids.size() && mass < row.top_p * total) mass += p[ids[r++]];
    ids.resize(std::max<size_t>(r, 1));
  }
  const float pmax = *std::max_element(p.begin(), p.end());
  int32_t best = -1;
  float best_key = -1;
  std::sort(ids.begin(), ids.end());
  for (int32_t i : ids) {
    if (!(p[i] > 0) || p[i] < row.min_p * pmax) continue;
    const float e = -std::log(philox_uniform(row.seed, row.step, static_cast<uint32_t>(i)));
    const float key = e > 0 ? p[i] / e : kInf;
    if (key > best_key) best_key = key, best = i;
  }
  return best;
}

}  // namespace

class SamplerTest : public QObject {
  Q_OBJECT
 private slots:
  void greedy_takes_the_argmax_and_the_lowest_id_on_ties() {
    SamplingRow greedy;
    greedy.temperature = 0.f;
    QCOMPARE(sample({0.1f, 3.f, -2.f, 2.9f}, greedy).token, 1);
    QCOMPARE(sample({1.f, 5.f, 5.f, 5.f}, greedy).token, 1);
    greedy.temperature = 1e-6f;  // below 1e-5 is greedy too
    QCOMPARE(sample({1.f, 5.f, 7.f, 7.f}, greedy).token, 2);
    greedy.seed = 99;  // seed does not matter
    QCOMPARE(sample({1.f, 5.f, 7.f, 7.f}, greedy).token, 2);
  }

  void seeds_reproduce_and_differ() {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0, 1);
    std::vector<float> logits(1000);
    for (float& v : logits) v = d(rng);
    SamplingRow row = random_row(1.f);
    row.seed = 1234;
    row.step = 5;
    const int32_t first = sample(logits, row).token;
    for (int i = 0; i < 5; ++i) QCOMPARE(sample(logits, row).token, first);
    std::set<int32_t> seen;
    for (uint64_t step = 0; step < 50; ++step) {
      row.step = step;
      seen.insert(sample(logits, row).token);
    }
    QVERIFY(seen.size() > 20);  // different steps draw different tokens from a flat distribution
  }

  void temperature_one_draws_the_softmax() {
    const std::vector<float> logits = {1.f, 2.f, 0.f, -1.f, 2.5f, 0.5f};
    check_frequencies(logits, random_row(1.f), expected_distribution(logits, random_row(1.f)));
  }

  void temperature_sharpens_and_flattens() {
    const std::vector<float> logits = {1.f, 2.f, 0.f, -1.f, 2.5f, 0.5f};
    for (float t : {0.5f, 2.0f})
      check_frequencies(logits, random_row(t), expected_distribution(logits, random_row(t)));
    // A low temperature concentrates mass on the argmax.
    const std::vector<double> cold = expected_distribution(logits, random_row(0.25f));
    QVERIFY(cold[4] > 0.85);
    check_frequencies(logits, random_row(0.25f), cold);
  }

  void top_k_keeps_the_k_largest() {
    const std::vector<float> logits = {1.f, 2.f, 0.f, -1.f, 2.5f, 0.5f, 2.f};
    SamplingRow row = random_row(1.f);
    row.top_k = 3;  // 2.5, then the tie 2.0 (ids 1 and 6): lower ids first -> {4, 1, 6}
    const std::vector<double> expected = expected_distribution(logits, row);
    QCOMPARE(std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; }), 3L);
    check_frequencies(logits, row, expected);
    row.top_k = 2;  // the tie is broken by id: 4 and 1, never 6
    std::vector<int> counts(logits.size());
    for (uint64_t s = 0; s < 2000; ++s) {
      row.seed = s;
      ++counts[sample(logits, row).token];
    }
    QCOMPARE(counts[6], 0);
    QVERIFY(counts[1] > 0 && counts[4] > 0);
  }

  void top_p_keeps_the_smallest_nucleus() {
    // p ~ {0.5, 0.25, 0.125, 0.0625, ...}: top_p 0.7 keeps the first two (0.5 < 0.7, then 0.75 >=
    // 0.7).
    std::vector<float> logits;
    for (int i = 0; i < 8; ++i) logits.push_back(-static_cast<float>(i) * std::log(2.f));
    SamplingRow row = random_row(1.f);
    row.top_p = 0.7f;
    const std::vector<double> expected = expected_distribution(logits, row);
    QVERIFY(expected[0] > 0 && expected[1] > 0 && expected[2] == 0);
    check_frequencies(logits, row, expected);
    row.top_p = 0.9f;  // 0.5 + 0.25 + 0.125 = 0.875 < 0.9: four tokens
    check_frequencies(logits, row, expected_distribution(logits, row));
  }

  void top_p_is_renormalized_after_top_k() {
    std::vector<float> logits;
    for (int i = 0; i < 8; ++i) logits.push_back(-static_cast<float>(i) * std::log(2.f));
    SamplingRow row = random_row(1.f);
    row.top_k = 3;     // kept masses 4/7, 2/7, 1/7
    row.top_p = 0.8f;  // 4/7 = 0.571 < 0.8, 6/7 = 0.857 >= 0.8: two tokens
    const std::vector<double> expected = expected_distribution(logits, row);
    QVERIFY(expected[1] > 0 && expected[2] == 0);
    check_frequencies(logits, row, expected);
  }

  void min_p_drops_unlikely_tokens() {
    const std::vector<float> logits = {3.f, 2.9f, 1.f, 0.f, -2.f};
    SamplingRow row = random_row(1.f);
    row.min_p = 0.2f;  // keeps p >= 0.2 * p_max: exp(-1.9) = 0.15 < 0.2 drops token 2
    const std::vector<double> expected = expected_distribution(logits, row);
    QVERIFY(expected[1] > 0 && expected[2] == 0);
    check_frequencies(logits, row, expected);
  }

  void combined_knobs_match_the_contract_token_for_token() {
    std::mt19937 rng(2);
    std::normal_distribution<float> d(0, 3);
    for (int64_t vocab : {1000, 49152}) {
      std::vector<float> logits(static_cast<size_t>(vocab));
      for (float& v : logits) v = d(rng);
      const SamplingRow rows[] = {
          [] {
            SamplingRow r;
            r.temperature = 0.7f;
            return r;
          }(),
          [] {
            SamplingRow r;
            r.temperature = 0.8f;
            r.top_p = 0.95f;
            return r;
          }(),
          [] {
            SamplingRow r;
            r.temperature = 1.3f;
            r.top_k = 50;
            r.top_p = 0.9f;
            return r;
          }(),
          [] {
            SamplingRow r;
            r.temperature = 1.0f;
            r.top_k = 40;
            r.min_p = 0.05f;
            return r;
          }(),
          [] {
            SamplingRow r;
            r.temperature = 1.0f;
            r.top_p = 0.999f;
            r.banned_tokens = {0, 1, 2};
            return r;
          }(),
      };
      for (SamplingRow row : rows)
        for (uint64_t seed = 0; seed < 40; ++seed) {
          row.seed = seed;
          row.step = seed * 3;
          QCOMPARE(sample(logits, row).token, contract_sample(logits, row));
        }
    }
  }

  void penalties_follow_the_arithmetic() {
    const std::vector<float> logits = {2.f, -1.f, 0.5f, 1.f, -3.f};
    SamplingRow row;
    row.temperature = 0.f;
    row.num_logprobs = 5;
    row.history_tokens = {0, 0, 1, /* output: */ 2, 2, 3, 0};
    row.history_prompt_len = 3;
    row.repetition_penalty = 2.f;
    row.frequency_penalty = 0.5f;
    row.presence_penalty = 0.25f;
    // repetition (each distinct token once): 0: 2/2 = 1, 1: -1*2 = -2, 2: 0.25, 3: 0.5, 4: -3.
    // frequency/presence over the output {2, 2, 3, 0}: 0: 1 - 0.75 = 0.25, 2: 0.25 - 1.25 = -1,
    // 3: 0.5 - 0.75 = -0.25.
    const std::vector<double> expect = {0.25, -2, -1, -0.25, -3};
    const SampledToken t = sample(logits, row);
    QCOMPARE(t.token, 0);
    QCOMPARE(t.top_logprobs.size(), size_t{5});
    double lse = 0;
    for (double v : expect) lse += std::exp(v);
    lse = std::log(lse);
    for (const TokenLogprob& lp : t.top_logprobs)
      QVERIFY2(std::abs(lp.logprob - (expect[lp.token] - lse)) < 1e-5,
               qPrintable(QString::number(lp.token)));
    // Without penalties the argmax would be token 0 with a different logprob; a strong repetition
    // penalty moves the argmax to the unseen token.
    row.frequency_penalty = row.presence_penalty = 0.f;
    row.repetition_penalty = 10.f;
    QCOMPARE(sample({2.f, -1.f, 0.5f, 1.f, 0.3f}, row).token, 4);
  }

  void logprobs_sum_to_one_and_come_before_temperature() {
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0, 2);
    std::vector<float> logits(300);
    for (float& v : logits) v = d(rng);
    SamplingRow row = random_row(0.3f);
    row.seed = 5;
    row.num_logprobs = 300;
    const SampledToken t = sample(logits, row);
    double total = 0;
    for (const TokenLogprob& lp : t.top_logprobs) total += std::exp(double(lp.logprob));
    QVERIFY(std::abs(total - 1) < 1e-5);
    for (size_t i = 1; i < t.top_logprobs.size(); ++i)
      QVERIFY(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    // Temperature 0.3 does not change them: log-softmax of the raw logits.
    double lse = 0;
    for (float v : logits) lse += std::exp(double(v));
    lse = std::log(lse);
    QVERIFY(std::abs(t.logprob - (logits[t.token] - lse)) < 1e-5);
    row.num_logprobs = 0;  // chosen only
    const SampledToken chosen = sample(logits, row);
    QVERIFY(chosen.top_logprobs.empty());
    QCOMPARE(chosen.token, t.token);
    QVERIFY(std::abs(chosen.logprob - t.logprob) < 1e-6);
    row.num_logprobs = -1;  // none
    QCOMPARE(sample(logits, row).logprob, 0.f);
  }

  void edge_cases() {
    const std::vector<float> logits = {0.5f, 1.f, 0.2f, 0.9f};
    SamplingRow row = random_row(1.f);
    row.top_k = 100;  // larger than the vocabulary: no truncation
    check_frequencies(logits, row, expected_distribution(logits, random_row(1.f)), 10000);

    row = random_row(1.f);
    row.top_p = 1e-6f;  // tiny nucleus: always the argmax
    for (uint64_t s = 0; s < 200; ++s) {
      row.seed = s;
      QCOMPARE(sample(logits, row).token, 1);
    }

    const std::vector<float> one = {-kInf, -kInf, 0.3f, -kInf};
    for (float temp : {0.f, 1.f, 5.f}) {
      row = random_row(temp);
      row.top_p = 0.5f;
      row.num_logprobs = 1;
      for (uint64_t s = 0; s < 50; ++s) {
        row.seed = s;
        const SampledToken t = sample(one, row);
        QCOMPARE(t.token, 2);
        QCOMPARE(t.logprob, 0.f);
      }
    }

    row = random_row(1.f);
    row.banned_tokens = {1, 3, 77, -1};  // out-of-range ids are ignored
    for (uint64_t s = 0; s < 300; ++s) {
      row.seed = s;
      const int32_t t = sample(logits, row).token;
      QVERIFY(t == 0 || t == 2);
    }
    row.banned_tokens = {0, 1, 2, 3};  // everything banned: token 0 by definition
    row.num_logprobs = 0;
    const SampledToken none = sample(logits, row);
    QCOMPARE(none.token, 0);
    QVERIFY(std::isinf(none.logprob) && none.logprob < 0);

    const std::vector<float> with_nan = {std::nanf(""), 1.f, 2.f};
    row = random_row(0.f);
    QCOMPARE(sample(with_nan, row).token, 2);
  }

  // logit_bias adds to the logit after the bans and before the penalties; -100 bans in effect,
  // +100 forces; logprobs see the biased logits.
  void logit_bias_shifts_the_chosen_logits() {
    const std::vector<float> logits = {0.5f, 1.f, 0.2f, 0.9f};
    SamplingRow row = random_row(0.f);
    row.logit_bias = {{1, -100.f}};
    QCOMPARE(sample(logits, row).token, 3);               // the argmax is biased away
    row.logit_bias = {{2, 100.f}, {99, 5.f}, {-3, 5.f}};  // out-of-range ids are ignored
    QCOMPARE(sample(logits, row).token, 2);
    row.logit_bias = {{0, 0.75f}};  // 0.5 + 0.75 = 1.25 > 1
    row.num_logprobs = 0;
    const SampledToken t = sample(logits, row);
    QCOMPARE(t.token, 0);
    std::vector<float> biased = {1.25f, 1.f, 0.2f, 0.9f};
    double sum = 0;
    for (float l : biased) sum += std::exp(static_cast<double>(l - 1.25f));
    QVERIFY(std::abs(t.logprob - static_cast<float>(-std::log(sum))) < 1e-6f);
    // A ban wins over a bias; random sampling never draws a -100 token.
    row = random_row(1.f);
    row.banned_tokens = {2};
    row.logit_bias = {{2, 100.f}, {1, -100.f}};
    for (uint64_t s = 0; s < 300; ++s) {
      row.seed = s;
      const int32_t tok = sample(logits, row).token;
      QVERIFY(tok == 0 || tok == 3);
    }
    // The bias comes before the repetition penalty: (0.2 + 1.0) / 1.5 = 0.8 < 0.9.
    row = random_row(0.f);
    row.logit_bias = {{2, 1.0f}};
    row.repetition_penalty = 1.5f;
    row.history_tokens = {2, 1};
    QCOMPARE(sample(logits, row).token, 3);
  }

  // The allowed-token mask (constrained decoding) leaves only its tokens; a short mask allows
  // nothing past its words.
  void allowed_mask_restricts_the_draw() {
    std::vector<float> logits(70);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
    auto mask = std::make_shared<TokenMask>(3, 0u);
    for (int t : {3, 40, 65}) (*mask)[t / 32] |= 1u << (t % 32);
    SamplingRow row = random_row(1.f);
    row.allowed = mask;
    std::set<int32_t> seen;
    for (uint64_t s = 0; s < 500; ++s) {
      row.seed = s;
      seen.insert(sample(logits, row).token);
    }
    QCOMPARE(seen, (std::set<int32_t>{3, 40, 65}));
    row = random_row(0.f);
    row.allowed = mask;
    row.logit_bias = {{40, 100.f}, {5, 100.f}};  // a bias cannot lift a masked token
    QCOMPARE(sample(logits, row).token, 40);
    row.allowed = std::make_shared<TokenMask>(1, 1u << 4);  // words for ids 0..31 only
    row.logit_bias = {{66, 100.f}};
    QCOMPARE(sample(logits, row).token, 4);
  }
};

QTEST_GUILESS_MAIN(SamplerTest)
#include "sampler_test.moc"
