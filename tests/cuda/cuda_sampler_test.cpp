// The GPU sampler (process_logits + sample_tokens) against the CPU sampler (runtime/sampler.h) on
// the same logits: greedy, temperature, top-k, top-p, min-p, repetition/frequency/presence
// penalties, banned tokens, logit bias, allowed-token masks (constrained decoding), NaN logits,
// exact ties, logprobs. Logits are random floats, so near-ties (two candidates within float
// rounding, where exp() implementations may disagree) have negligible probability: every row must
// choose the same token. Logprobs agree within 1e-4 (float32 vs a double-precision log-sum-exp with
// a different summation order); the penalized logits are equal.
#include <QtTest>

#include <random>

#include "cuda_test_util.h"
#include "engine/backend/cuda/process_logits.h"
#include "engine/backend/cuda/sample_tokens.h"
#include "engine/runtime/sampler.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

std::vector<SamplingRow> make_rows(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<SamplingRow> rows(static_cast<size_t>(n));
  const float temps[] = {0.f, 0.7f, 1.0f, 1.3f};
  const int32_t ks[] = {0, 1, 5, 50, 0};
  const float ps[] = {1.f, 0.9f, 0.5f, 1.f, 0.95f};
  for (int i = 0; i < n; ++i) {
    SamplingRow& r = rows[static_cast<size_t>(i)];
    r.temperature = temps[i % 4];
    r.top_k = ks[(i / 4) % 5];
    r.top_p = ps[(i / 3) % 5];
    r.min_p = (i % 7 == 3) ? 0.05f : 0.f;
    r.seed = 1000 + static_cast<uint64_t>(i) * 7919;
    r.step = static_cast<uint64_t>(i % 13);
    r.num_logprobs = (i % 5 == 0) ? 5 : ((i % 5 == 1) ? 0 : -1);
    if (i % 6 == 2) {
      r.repetition_penalty = 1.3f;
      r.frequency_penalty = 0.4f;
      r.presence_penalty = 0.25f;
    } else if (i % 6 == 5) {
      r.repetition_penalty = 0.8f;
    }
    if (r.repetition_penalty != 1.f || r.frequency_penalty != 0.f) {
      const int len = 40 + static_cast<int>(rng() % 200);
      for (int j = 0; j < len; ++j)
        r.history_tokens.push_back(static_cast<TokenId>(rng() % 300));  // repeats
      r.history_prompt_len = len / 2;
    }
    if (i % 4 == 1)
      r.banned_tokens = {static_cast<TokenId>(rng() % vocab), 2, -5,
                         static_cast<TokenId>(vocab + 3)};
    if (i % 5 == 2)
      r.logit_bias = {{static_cast<TokenId>(rng() % vocab), 7.5f},
                      {static_cast<TokenId>(1 + rng() % 9), -100.f},
                      {static_cast<TokenId>(vocab + 1), 3.f}};
    if (i % 3 == 1) {
      // Every third token allowed, plus a random run: a grammar's mask.
      auto mask = std::make_shared<TokenMask>(static_cast<size_t>((vocab + 31) / 32), 0u);
      const int64_t start = static_cast<int64_t>(rng() % vocab);
      for (int64_t t = 0; t < vocab; ++t)
        if (t % 3 == 0 || (t >= start && t < start + 40)) (*mask)[t / 32] |= 1u << (t % 32);
      r.allowed = std::move(mask);
    }
  }
  return rows;
}

// Where the GPU sampler's masks are applied (gpu_sampler_matches_cpu).
enum MaskMode { kProcess, kSamplerStep, kSamplerCache };

}  // namespace

class CudaSamplerTest : public QObject {
  Q_OBJECT
 private slots:
  // Masks either written over the logits by process_logits() (kProcess) or read by sample_tokens()
  // from the step's words (kSamplerStep) or the device mask cache (kSamplerCache): the same
  // tokens and logprobs as the CPU; the processed logits equal the CPU's wherever a token is
  // allowed (masked tokens are -inf in memory only with kProcess).
  void gpu_sampler_matches_cpu_data() {
    QTest::addColumn<int>("vocab");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("masks");
    const std::pair<const char*, int> modes[] = {{"masks in process_logits", kProcess},
                                                 {"masks read by the sampler", kSamplerStep},
                                                 {"masks read from the cache", kSamplerCache}};
    for (const auto& [name, mode] : modes) {
      QTest::newRow(qPrintable(QString("vocab 5000, %1").arg(name))) << 5000 << 120 << mode;
      QTest::newRow(qPrintable(QString("vocab 128256, %1").arg(name))) << 128256 << 24 << mode;
      QTest::newRow(
          qPrintable(QString("vocab 5001 (unaligned rows: the scalar max scan), %1").arg(name)))
          << 5001 << 40 << mode;
    }
  }
  void gpu_sampler_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, vocab);
    QFETCH(int, rows);
    QFETCH(int, masks);
    const int64_t v = vocab;
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> normal(0.f, 3.f);
    std::vector<float> logits(static_cast<size_t>(rows) * v);
    for (float& x : logits) x = normal(rng);
    for (int i = 0; i < rows; ++i) {
      float* l = logits.data() + i * v;
      if (i % 9 == 4) l[17] = std::nanf("");  // NaN counts as -inf
      if (i % 5 == 3) l[20] = l[10] = 12.f;   // an exact tie at the top: lowest id wins
      if (i % 11 == 7)
        for (int64_t j = 0; j < v; ++j) l[j] *= 0.1f;  // flat: large nuclei
    }
    const std::vector<SamplingRow> srows = make_rows(rows, v, 3);

    // Device rows, banned ids and histories in CSR form.
    std::vector<cuda::DeviceSamplingRow> drows(static_cast<size_t>(rows));
    std::vector<int32_t> banned, history;
    std::vector<cuda::DeviceTokenBias> biases;
    std::vector<uint32_t> words;
    for (int i = 0; i < rows; ++i) {
      const SamplingRow& r = srows[static_cast<size_t>(i)];
      cuda::DeviceSamplingRow& d = drows[static_cast<size_t>(i)];
      d.temperature = r.temperature;
      d.top_p = r.top_p;
      d.top_k = r.top_k;
      d.min_p = r.min_p;
      d.repetition_penalty = r.repetition_penalty;
      d.presence_penalty = r.presence_penalty;
      d.frequency_penalty = r.frequency_penalty;
      d.seed = r.seed;
      d.step = r.step;
      d.num_logprobs = r.num_logprobs;
      d.logits_row = i;
      d.banned_begin = static_cast<int32_t>(banned.size());
      banned.insert(banned.end(), r.banned_tokens.begin(), r.banned_tokens.end());
      d.banned_end = static_cast<int32_t>(banned.size());
      d.history_begin = static_cast<int32_t>(history.size());
      d.history_prompt_end = d.history_begin + r.history_prompt_len;
      history.insert(history.end(), r.history_tokens.begin(), r.history_tokens.end());
      d.history_end = static_cast<int32_t>(history.size());
      d.bias_begin = static_cast<int32_t>(biases.size());
      for (const TokenBias& b : r.logit_bias) biases.push_back({b.token, b.bias});
      d.bias_end = static_cast<int32_t>(biases.size());
      if (r.allowed) {
        d.mask_begin = static_cast<int32_t>(words.size());
        d.mask_in_cache = masks == kSamplerCache ? 1 : 0;
        words.insert(words.end(), r.allowed->begin(), r.allowed->end());
      }
    }
    biases.push_back({});  // never empty: Dev::from needs bytes
    words.push_back(0);
    Dev d_logits = Dev::from(logits), d_rows = Dev::from(drows), d_banned = Dev::from(banned),
        d_hist = Dev::from(history), d_bias = Dev::from(biases), d_words = Dev::from(words);
    Dev d_counts = Dev::from(std::vector<int32_t>(static_cast<size_t>(rows) * v, 0));
    Dev d_out = Dev::poisoned(rows * 8),
        d_top = Dev::poisoned(int64_t{rows} * cuda::kMaxTopLogprobs * 8);
    const uint32_t* step_words = masks == kSamplerCache ? nullptr : d_words.as<uint32_t>();
    const uint32_t* cache_words = masks == kSamplerCache ? d_words.as<uint32_t>() : nullptr;
    LATHE_QVERIFY_OK(cuda::process_logits(
        d_logits.as<float>(), v, d_rows.as<cuda::DeviceSamplingRow>(), rows, d_banned.as<int32_t>(),
        d_hist.as<int32_t>(), d_bias.as<cuda::DeviceTokenBias>(), step_words, cache_words,
        masks == kProcess, d_counts.as<int32_t>(), nullptr));
    LATHE_QVERIFY_OK(cuda::sample_tokens(
        d_logits.as<float>(), v, d_rows.as<cuda::DeviceSamplingRow>(), rows,
        d_out.as<cuda::DeviceSampledToken>(), d_top.as<cuda::DeviceTokenLogprob>(), nullptr,
        masks == kProcess ? nullptr : step_words, masks == kProcess ? nullptr : cache_words));
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = d_out.download<cuda::DeviceSampledToken>(static_cast<size_t>(rows));
    const auto top =
        d_top.download<cuda::DeviceTokenLogprob>(static_cast<size_t>(rows) * cuda::kMaxTopLogprobs);
    const std::vector<float> processed = d_logits.download<float>(logits.size());
    for (int32_t c : d_counts.download<int32_t>(static_cast<size_t>(rows) * v)) QCOMPARE(c, 0);

    int mismatches = 0;
    for (int i = 0; i < rows; ++i) {
      std::vector<float> l(logits.begin() + i * v, logits.begin() + (i + 1) * v);
      const SampledToken want = sample_token(l.data(), v, srows[static_cast<size_t>(i)]);
      const TokenMask* mask = srows[static_cast<size_t>(i)].allowed.get();
      for (int64_t j = 0; j < v; ++j) {
        const bool masked_out =
            mask != nullptr && (((*mask)[static_cast<size_t>(j >> 5)] >> (j & 31)) & 1u) == 0;
        if (masks != kProcess && masked_out) continue;  // left for the sampler to read as -inf
        const float g = std::isnan(processed[i * v + j]) ? -INFINITY : processed[i * v + j];
        if (g != l[j])
          QFAIL(qPrintable(
              QString("row %1: penalized logit %2 is %3, CPU %4").arg(i).arg(j).arg(g).arg(l[j])));
      }
      if (out[i].token != want.token) {
        ++mismatches;
        qWarning("row %d (T=%g k=%d p=%g): GPU token %d, CPU token %d", i, srows[i].temperature,
                 srows[i].top_k, srows[i].top_p, out[i].token, want.token);
        continue;
      }
      const int32_t k = srows[static_cast<size_t>(i)].num_logprobs;
      if (k >= 0) {
        QVERIFY(std::fabs(out[i].logprob - want.logprob) <= 1e-4f);
        QCOMPARE(static_cast<int>(want.top_logprobs.size()), k);
        for (int j = 0; j < k; ++j) {
          const cuda::DeviceTokenLogprob& g =
              top[static_cast<size_t>(i) * cuda::kMaxTopLogprobs + j];
          QCOMPARE(g.token, want.top_logprobs[j].token);
          QVERIFY(std::fabs(g.logprob - want.top_logprobs[j].logprob) <= 1e-4f);
        }
      }
    }
    QCOMPARE(mismatches, 0);
  }

  // All logits -inf (every token banned): token 0, as the CPU sampler does.
  void all_banned_gives_token_zero() {
    LATHE_REQUIRE_GPU();
    const int64_t v = 64;
    std::vector<float> logits(v, -INFINITY);
    cuda::DeviceSamplingRow r;
    r.temperature = 0.9f;
    r.num_logprobs = 0;
    Dev d_logits = Dev::from(logits), d_rows = Dev::from(std::vector<cuda::DeviceSamplingRow>{r});
    Dev d_out = Dev::poisoned(8), d_top = Dev::poisoned(cuda::kMaxTopLogprobs * 8);
    LATHE_QVERIFY_OK(cuda::sample_tokens(
        d_logits.as<float>(), v, d_rows.as<cuda::DeviceSamplingRow>(), 1,
        d_out.as<cuda::DeviceSampledToken>(), d_top.as<cuda::DeviceTokenLogprob>(), nullptr));
    LATHE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = d_out.download<cuda::DeviceSampledToken>(1);
    QCOMPARE(out[0].token, 0);
    QVERIFY(std::isinf(out[0].logprob) && out[0].logprob < 0);
  }
};

QTEST_GUILESS_MAIN(CudaSamplerTest)
#include "cuda_sampler_test.moc"
