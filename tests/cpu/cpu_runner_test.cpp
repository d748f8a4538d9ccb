// The CPU model runner against transformers: tiny random-weight models saved by transformers
// (tests/fixtures/models, made by scripts/fixtures/make_model_fixtures.py) and transformers'
// float32 logits at every position. Lathe's logits must agree to 1e-3 whether a sequence is
// prefilled in one step, in chunks, or decoded token by token through a paged cache with shuffled
// block tables — always through ModelInput, as the engine drives the runner.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/token_constraint.h"
#include "test_support.h"

using namespace lathe;

namespace {

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 40;
constexpr double kTolerance = 1e-3;

struct Reference {
  int64_t vocab = 0;
  std::vector<std::vector<int32_t>> tokens;  // per sequence
  std::vector<int64_t> first_row;            // row of each sequence's position 0 in logits
  std::vector<float> logits;                 // [positions, vocab]

  const float* row(size_t seq, int32_t pos) const {
    return logits.data() + (first_row[seq] + pos) * vocab;
  }
};

Reference read_reference(const std::string& dir) {
  Reference r;
  QFile json(QString::fromStdString(dir + "/reference.json"));
  if (!json.open(QIODevice::ReadOnly)) return r;
  const QJsonObject root = QJsonDocument::fromJson(json.readAll()).object();
  r.vocab = root["vocab_size"].toInt();
  for (const QJsonValue& s : root["sequences"].toArray()) {
    std::vector<int32_t> t;
    for (const QJsonValue& v : s.toObject()["tokens"].toArray()) t.push_back(v.toInt());
    r.tokens.push_back(t);
    r.first_row.push_back(s.toObject()["logits_row"].toInt());
  }
  QFile bin(QString::fromStdString(dir + "/reference.f32"));
  if (!bin.open(QIODevice::ReadOnly)) return Reference{};
  const QByteArray bytes = bin.readAll();
  r.logits.resize(bytes.size() / sizeof(float));
  std::memcpy(r.logits.data(), bytes.data(), r.logits.size() * sizeof(float));
  return r;
}

// A sequence as the engine core tracks it: its tokens, its blocks, how many are computed.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int32_t computed = 0;
};

// One step in which sequence i computes num_new[i] more tokens (0: not scheduled); every scheduled
// sequence is sampled (its last computed token's logits come back).
ModelInput make_step(std::vector<Seq>& seqs, const std::vector<int32_t>& num_new,
                     int32_t max_blocks) {
  ModelInput in;
  in.query_start.push_back(0);
  in.max_blocks_per_seq = max_blocks;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (num_new[i] == 0) continue;
    Seq& s = seqs[i];
    for (int32_t j = 0; j < num_new[i]; ++j) {
      const int32_t pos = s.computed + j;
      in.token_ids.push_back(s.tokens[pos]);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(int64_t{s.blocks[pos / kBlockSize]} * kBlockSize +
                                pos % kBlockSize);
    }
    s.computed += num_new[i];
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(s.computed);
    std::vector<int32_t> row(static_cast<size_t>(max_blocks), 0);
    std::copy(s.blocks.begin(), s.blocks.end(), row.begin());
    in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
    in.max_seq_len = std::max(in.max_seq_len, s.computed);
    in.max_query_len = std::max(in.max_query_len, num_new[i]);
    in.sample_seqs.push_back(in.num_seqs() - 1);
    SamplingRow greedy;
    greedy.temperature = 0.f;
    in.sampling.push_back(greedy);
  }
  return in;
}

// Sequences for the reference's token lists with blocks drawn from a shuffled pool.
std::vector<Seq> make_seqs(const Reference& ref, std::mt19937& rng, int32_t* max_blocks) {
  std::vector<int32_t> pool(kNumBlocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<Seq> seqs;
  size_t next = 0;
  *max_blocks = 0;
  for (const std::vector<int32_t>& t : ref.tokens) {
    Seq s;
    s.tokens = t;
    const int32_t n = (static_cast<int32_t>(t.size()) + kBlockSize - 1) / kBlockSize;
    s.blocks.assign(pool.begin() + next, pool.begin() + next + n);
    next += n;
    *max_blocks = std::max(*max_blocks, n);
    seqs.push_back(s);
  }
  return seqs;
}

double max_diff(const float* a, const float* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

struct Fixture {
  LoadedModel model;
  Reference ref;
  std::unique_ptr<ModelRunner> runner;
};

// Loads a fixture folder and a runner with a fresh cache; QVERIFY-style failures via the Status.
Status open_fixture(const QString& name, int threads, Fixture* f) {
  const std::string dir = test::fixture_path("models/" + name.toStdString());
  LoadOptions options;
  options.load_tokenizer = false;
  LATHE_ASSIGN_OR_RETURN(f->model, load_model(dir, options));
  f->ref = read_reference(dir);
  if (f->ref.logits.empty()) return not_found(dir + ": reference.json / reference.f32 missing");
  CpuRunnerOptions ro;
  ro.num_threads = threads;
  LATHE_ASSIGN_OR_RETURN(f->runner, create_cpu_model_runner(f->model, ro));
  return f->runner->allocate_kv_cache(kNumBlocks, kBlockSize);
}

// A constraint whose every state allows one fixed mask; counts its lookups and those made on a
// thread other than the one that created it.
class FixedMaskConstraint final : public TokenConstraint {
 public:
  explicit FixedMaskConstraint(std::shared_ptr<const TokenMask> mask)
      : mask_(std::move(mask)), owner_(std::this_thread::get_id()) {}
  int32_t start() const override { return 0; }
  int32_t advance(int32_t state, TokenId) override { return state; }
  std::shared_ptr<const TokenMask> allowed(int32_t state, std::span<const TokenId>) override {
    ++lookups;
    if (std::this_thread::get_id() != owner_) ++off_thread;
    last_state = state;
    return mask_;
  }
  int lookups = 0, off_thread = 0, last_state = -1;

 private:
  std::shared_ptr<const TokenMask> mask_;
  std::thread::id owner_;
};

}  // namespace

class CpuRunnerTest : public QObject {
  Q_OBJECT

  void add_fixtures() {
    QTest::addColumn<QString>("fixture");
    for (const char* name :
         {"llama_tied", "llama3_untied_bf16", "mistral_f16", "qwen2_tied", "qwen3_untied_bf16"})
      QTest::newRow(name) << QString(name);
  }

 private slots:
  void prefill_in_one_step_matches_transformers_data() { add_fixtures(); }
  void prefill_in_one_step_matches_transformers() {
    QFETCH(QString, fixture);
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture(fixture, 2, &f));
    QCOMPARE(f.runner->vocab_size(), f.ref.vocab);
    std::mt19937 rng(1);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    std::vector<int32_t> all;
    for (const Seq& s : seqs) all.push_back(static_cast<int32_t>(s.tokens.size()));
    const ModelInput in = make_step(seqs, all, max_blocks);
    Result<std::vector<float>> logits = f.runner->compute_logits(in);
    LATHE_QVERIFY_RESULT(logits);
    QCOMPARE(logits->size(), seqs.size() * size_t(f.ref.vocab));
    for (size_t s = 0; s < seqs.size(); ++s) {
      const double d =
          max_diff(logits->data() + s * f.ref.vocab, f.ref.row(s, all[s] - 1), f.ref.vocab);
      QVERIFY2(d <= kTolerance, qPrintable(QString("sequence %1: max |Δ| %2").arg(s).arg(d)));
    }
  }

  void chunked_prefill_matches_transformers_data() { add_fixtures(); }
  void chunked_prefill_matches_transformers() {
    QFETCH(QString, fixture);
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture(fixture, 2, &f));
    std::mt19937 rng(2);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    // Chunks of 5 and 3 tokens: chunk boundaries fall inside blocks; the shorter sequence finishes
    // first and later steps hold one sequence only.
    const int32_t chunk[2] = {5, 3};
    int checked = 0;
    for (;;) {
      std::vector<int32_t> n;
      for (size_t s = 0; s < seqs.size(); ++s)
        n.push_back(std::min<int32_t>(
            chunk[s % 2], static_cast<int32_t>(seqs[s].tokens.size()) - seqs[s].computed));
      if (std::all_of(n.begin(), n.end(), [](int32_t v) { return v == 0; })) break;
      const ModelInput in = make_step(seqs, n, max_blocks);
      Result<std::vector<float>> logits = f.runner->compute_logits(in);
      LATHE_QVERIFY_RESULT(logits);
      size_t row = 0;
      for (size_t s = 0; s < seqs.size(); ++s) {
        if (n[s] == 0) continue;
        const double d = max_diff(logits->data() + row++ * f.ref.vocab,
                                  f.ref.row(s, seqs[s].computed - 1), f.ref.vocab);
        QVERIFY2(d <= kTolerance,
                 qPrintable(
                     QString("sequence %1 at %2: max |Δ| %3").arg(s).arg(seqs[s].computed).arg(d)));
        ++checked;
      }
    }
    QVERIFY(checked >= 8);
  }

  void decode_token_by_token_matches_transformers_data() { add_fixtures(); }
  void decode_token_by_token_matches_transformers() {
    QFETCH(QString, fixture);
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture(fixture, 2, &f));
    std::mt19937 rng(3);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    double worst = 0;
    int checked = 0;
    for (;;) {
      std::vector<int32_t> n;
      for (const Seq& s : seqs)
        n.push_back(s.computed < static_cast<int32_t>(s.tokens.size()) ? 1 : 0);
      if (std::all_of(n.begin(), n.end(), [](int32_t v) { return v == 0; })) break;
      const ModelInput in = make_step(seqs, n, max_blocks);
      Result<std::vector<float>> logits = f.runner->compute_logits(in);
      LATHE_QVERIFY_RESULT(logits);
      size_t row = 0;
      for (size_t s = 0; s < seqs.size(); ++s) {
        if (n[s] == 0) continue;
        worst = std::max(worst, max_diff(logits->data() + row++ * f.ref.vocab,
                                         f.ref.row(s, seqs[s].computed - 1), f.ref.vocab));
        ++checked;
      }
    }
    QCOMPARE(checked, int(f.ref.tokens[0].size() + f.ref.tokens[1].size()));  // every position
    qInfo("%s: max |Δ| over every position %.2e", qPrintable(fixture), worst);
    QVERIFY2(worst <= kTolerance, qPrintable(QString("max |Δ| %1").arg(worst)));
  }

  void batched_equals_alone_and_threads_do_not_matter() {
    Fixture two, one;
    LATHE_QVERIFY_OK(open_fixture("qwen2_tied", 2, &two));
    LATHE_QVERIFY_OK(open_fixture("qwen2_tied", 1, &one));
    std::mt19937 rng(4);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(two.ref, rng, &max_blocks);
    std::vector<Seq> copy = seqs;
    // Both sequences prefilled together on 2 threads ...
    Result<std::vector<float>> both =
        two.runner->compute_logits(make_step(seqs, {19, 13}, max_blocks));
    LATHE_QVERIFY_RESULT(both);
    // ... and the second alone on 1 thread: the same bits.
    Result<std::vector<float>> alone =
        one.runner->compute_logits(make_step(copy, {0, 13}, max_blocks));
    LATHE_QVERIFY_RESULT(alone);
    QVERIFY(std::memcmp(alone->data(), both->data() + two.ref.vocab,
                        two.ref.vocab * sizeof(float)) == 0);
  }

  // A multi-token step that samples the trailing rows of sequences (drafts to verify, model_io.h):
  // every row matches transformers at its position, bit for bit what one-token steps give, and
  // execute() keeps the drafts the argmax agrees with (draft_acceptance.h).
  void rows_of_a_step_with_drafts_match_transformers() {
    Fixture f, g;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 2, &f));
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 2, &g));
    std::mt19937 rng(7);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    std::vector<Seq> single = seqs;
    LATHE_QVERIFY_RESULT(f.runner->compute_logits(make_step(seqs, {10, 6}, max_blocks)));
    LATHE_QVERIFY_RESULT(g.runner->compute_logits(make_step(single, {10, 6}, max_blocks)));
    // Sequence 0 computes 4 tokens and samples all 4 rows; sequence 1 computes 3 and samples 2.
    ModelInput in = make_step(seqs, {4, 3}, max_blocks);
    in.sample_counts = {4, 2};
    const SamplingRow greedy_row = in.sampling[0];
    in.sampling.assign(6, greedy_row);
    Result<std::vector<float>> rows = f.runner->compute_logits(in);
    LATHE_QVERIFY_RESULT(rows);
    QCOMPARE(rows->size(), size_t{6} * size_t(f.ref.vocab));
    const int32_t positions[6][2] = {{0, 10}, {0, 11}, {0, 12}, {0, 13}, {1, 7}, {1, 8}};
    for (int r = 0; r < 6; ++r) {
      const double d = max_diff(rows->data() + r * f.ref.vocab,
                                f.ref.row(positions[r][0], positions[r][1]), f.ref.vocab);
      QVERIFY2(d <= kTolerance, qPrintable(QString("row %1: max |Δ| %2").arg(r).arg(d)));
    }
    // The same positions one token per step on the other runner: the same bits.
    for (int t = 0; t < 4; ++t) {
      Result<std::vector<float>> one =
          g.runner->compute_logits(make_step(single, {1, t < 3 ? 1 : 0}, max_blocks));
      LATHE_QVERIFY_RESULT(one);
      QVERIFY(std::memcmp(one->data(), rows->data() + t * f.ref.vocab,
                          f.ref.vocab * sizeof(float)) == 0);
      if (t == 1 || t == 2)
        QVERIFY(std::memcmp(one->data() + f.ref.vocab, rows->data() + (3 + t) * f.ref.vocab,
                            f.ref.vocab * sizeof(float)) == 0);
    }

    // execute(): sequence 0's drafts are its last 3 tokens. Make the first one the argmax of row 0
    // (so it is accepted) by recomputing the step on a fresh runner with that token.
    auto argmax = [&](const float* row) {
      return static_cast<TokenId>(std::max_element(row, row + f.ref.vocab) - row);
    };
    Fixture h;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 2, &h));
    std::vector<Seq> again = make_seqs(h.ref, rng, &max_blocks);
    LATHE_QVERIFY_RESULT(h.runner->compute_logits(make_step(again, {10, 0}, max_blocks)));
    again[0].tokens[11] = argmax(rows->data());  // d_1 := s_0
    ModelInput spec = make_step(again, {4, 0}, max_blocks);
    spec.sample_counts = {4};
    spec.sampling.assign(4, greedy_row);
    Result<ModelOutput> out = h.runner->execute(spec);
    LATHE_QVERIFY_RESULT(out);
    QCOMPARE(out->num_tokens.size(), size_t{1});
    QVERIFY(out->num_tokens[0] >= 2);
    QCOMPARE(out->tokens.size(), size_t(out->num_tokens[0]));
    QCOMPARE(out->tokens[0].token, again[0].tokens[11]);
    for (int j = 1; j + 1 < out->num_tokens[0]; ++j)
      QCOMPARE(out->tokens[j].token, again[0].tokens[11 + j]);  // accepted drafts are the drafts
  }

  void bad_sample_counts_are_errors_not_crashes() {
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 1, &f));
    std::mt19937 rng(8);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    const ModelInput in = make_step(seqs, {3, 2}, max_blocks);
    ModelInput bad = in;
    bad.sample_counts = {4, 1};  // more rows than the sequence's 3 tokens
    bad.sampling.resize(5);
    Result<ModelOutput> r = f.runner->execute(bad);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.status().message().find("sample count 4") != std::string::npos,
             r.status().message().c_str());
    bad = in;
    bad.sample_counts = {2, 1};  // 3 rows but 2 sampling rows
    r = f.runner->execute(bad);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.status().message().find("one row per sampled row (3)") != std::string::npos,
             r.status().message().c_str());
    bad = in;
    bad.sample_counts = {2};  // not one per sampled sequence
    QVERIFY(!f.runner->execute(bad).is_ok());
    bad = in;
    bad.sample_counts = {0, 1};
    QVERIFY(!f.runner->execute(bad).is_ok());
    QVERIFY(f.runner->execute(in).is_ok());
  }

  void execute_samples_the_argmax_when_greedy() {
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 2, &f));
    std::mt19937 rng(5);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    ModelInput in = make_step(seqs, {19, 13}, max_blocks);
    in.sampling[1].num_logprobs = 2;
    Result<ModelOutput> out = f.runner->execute(in);
    LATHE_QVERIFY_RESULT(out);
    QCOMPARE(out->tokens.size(), size_t{2});
    for (size_t s = 0; s < 2; ++s) {
      const float* ref = f.ref.row(s, static_cast<int32_t>(f.ref.tokens[s].size()) - 1);
      QCOMPARE(out->tokens[s].token, int32_t(std::max_element(ref, ref + f.ref.vocab) - ref));
    }
    QCOMPARE(out->tokens[1].top_logprobs.size(), size_t{2});
    QCOMPARE(out->tokens[1].top_logprobs[0].token, out->tokens[1].token);
    QVERIFY(out->tokens[1].logprob < 0);
  }

  // A row whose mask the engine left to the runner (SamplingRow::constraint) is looked up on the
  // calling thread, never on the sampling workers (token_constraint.h), and sampled exactly as a
  // row carrying the same mask: the argmax over the allowed tokens.
  void execute_looks_masks_up_on_the_calling_thread() {
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 2, &f));
    std::mt19937 rng(5);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    ModelInput in = make_step(seqs, {19, 13}, max_blocks);
    const std::vector<TokenId> allowed_ids = {3, 11, 17};
    auto mask = std::make_shared<TokenMask>(static_cast<size_t>((f.ref.vocab + 31) / 32), 0u);
    for (TokenId t : allowed_ids) (*mask)[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    FixedMaskConstraint constraint(mask);
    const std::vector<TokenId> end_ids = {2};
    in.sampling[0].constraint = &constraint;
    in.sampling[0].constraint_state = 7;
    in.sampling[0].constraint_end_ids = end_ids;
    in.sampling[1].allowed = mask;
    Result<ModelOutput> out = f.runner->execute(in);
    LATHE_QVERIFY_RESULT(out);
    QCOMPARE(constraint.lookups, 1);
    QCOMPARE(constraint.off_thread, 0);
    QCOMPARE(constraint.last_state, 7);
    for (size_t s = 0; s < 2; ++s) {
      const float* ref = f.ref.row(s, static_cast<int32_t>(f.ref.tokens[s].size()) - 1);
      TokenId best = allowed_ids[0];
      for (TokenId t : allowed_ids)
        if (ref[t] > ref[best]) best = t;
      QCOMPARE(out->tokens[s].token, best);
    }
  }

  void bad_inputs_are_errors_not_crashes() {
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 1, &f));
    std::mt19937 rng(6);
    int32_t max_blocks;
    std::vector<Seq> seqs = make_seqs(f.ref, rng, &max_blocks);
    ModelInput in = make_step(seqs, {4, 0}, max_blocks);
    ModelInput bad = in;
    bad.token_ids[1] = 300;  // vocab is 300
    QVERIFY(!f.runner->execute(bad).is_ok());
    bad = in;
    bad.block_tables[0] = kNumBlocks;
    QVERIFY(!f.runner->execute(bad).is_ok());
    bad = in;
    bad.positions[2] = 7;
    QVERIFY(!f.runner->execute(bad).is_ok());
    bad = in;
    bad.slot_mapping[0] += 1;
    QVERIFY(!f.runner->execute(bad).is_ok());
    QVERIFY(f.runner->execute(in).is_ok());

    // A runner without a cache refuses to run.
    CpuRunnerOptions ro;
    Result<std::unique_ptr<ModelRunner>> fresh = create_cpu_model_runner(f.model, ro);
    LATHE_QVERIFY_RESULT(fresh);
    QVERIFY(!(*fresh)->execute(in).is_ok());
  }

  void dummy_weights_are_seeded_and_sane() {
    LoadOptions lo;
    lo.load_format = LoadFormat::kDummy;
    lo.load_tokenizer = false;
    Result<LoadedModel> model = load_model(test::fixture_path("models/qwen3_untied_bf16"), lo);
    LATHE_QVERIFY_RESULT(model);
    QCOMPARE(model->format, ModelFormat::kDummy);
    auto run = [&](uint64_t seed) -> std::vector<float> {
      CpuRunnerOptions ro;
      ro.dummy_seed = seed;
      Result<std::unique_ptr<ModelRunner>> r = create_cpu_model_runner(*model, ro);
      if (!r.is_ok() || !(*r)->allocate_kv_cache(kNumBlocks, kBlockSize).is_ok()) return {};
      Reference ref;
      ref.tokens = {{1, 5, 9, 200, 7, 3}};
      std::mt19937 rng(7);
      int32_t max_blocks;
      std::vector<Seq> seqs = make_seqs(ref, rng, &max_blocks);
      Result<std::vector<float>> logits = (*r)->compute_logits(make_step(seqs, {6}, max_blocks));
      return logits.is_ok() ? *logits : std::vector<float>{};
    };
    const std::vector<float> a = run(1), b = run(1), c = run(2);
    QCOMPARE(a.size(), size_t{300});
    QVERIFY(std::all_of(a.begin(), a.end(),
                        [](float v) { return std::isfinite(v) && std::abs(v) < 10; }));
    QVERIFY(a == b);
    QVERIFY(a != c);
  }

  // Dummy weights larger than the machine's RAM (Llama-3.1-70B's shape with 20,000 layers: about
  // 33 TiB) are refused before anything is allocated, with the numbers and what to do.
  void dummy_weights_larger_than_ram_are_refused_with_the_numbers() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = test::config_with_layers(
        test::fixture_path("../../benchmarks/configs/llama-3.1-70b"), dir.path(), 20000);
    QVERIFY(!path.empty());
    LoadOptions lo;
    lo.load_format = LoadFormat::kDummy;
    lo.load_tokenizer = false;
    Result<LoadedModel> model = load_model(path, lo);
    LATHE_QVERIFY_RESULT(model);
    Result<std::unique_ptr<ModelRunner>> r = create_cpu_model_runner(*model, CpuRunnerOptions{});
    QVERIFY(!r.is_ok());
    QCOMPARE(static_cast<int>(r.status().code()), static_cast<int>(ErrorCode::kOutOfMemory));
    const std::string msg = r.status().message();
    QVERIFY2(msg.find("TiB of RAM, more than the machine's") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("use a quantized format") != std::string::npos, msg.c_str());
  }

  void memory_info_describes_the_cpu() {
    Fixture f;
    LATHE_QVERIFY_OK(open_fixture("llama_tied", 2, &f));
    const DeviceMemoryInfo& m = f.runner->memory_info();
    QVERIFY(QString::fromStdString(m.device_name).startsWith("CPU (2 threads"));
    QVERIFY(m.total_bytes > 0);
    QCOMPARE(m.weight_bytes, f.model.weights.total_bytes());
    QVERIFY(m.kv_budget_bytes > 0 && m.kv_budget_bytes <= (int64_t{1} << 30));
    // K and V, 3 layers, 2 KV heads of 16 floats, per token.
    QCOMPARE(f.runner->kv_block_bytes(16), int64_t{2 * 3 * 2 * 16 * 4 * 16});
  }
};

QTEST_GUILESS_MAIN(CpuRunnerTest)
#include "cpu_runner_test.moc"
