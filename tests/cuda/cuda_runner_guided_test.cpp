// Constrained decoding on the CUDA runner with lookahead (step_executor.h, late-bound sampling
// rows): each decode step's input marks the next step as continuing, so the runner launches the
// predicted next forward pass before the host has the tokens, and samples it with the masks the
// host computes afterwards from those tokens. Against a runner without lookahead, fed the same
// inputs: the same tokens, greedy and seeded random, batches 1 to 3, through block boundaries
// (where nothing is predicted) and past each sequence's end (where its mask changes to the end id
// only); every output is a complete JSON document valid under the schema. The grammar is a real
// one (a JSON schema compiled by json_schema_to_regex, masks by GrammarConstraint) over a byte
// vocabulary of 283 tokens inside the fixture model's 300.
// Masks reach the runner both ways the engine gives them (a computed mask, or the constraint and
// state for the runner to look up: row_mask()), and the same tokens come from the path before the
// mask cache (LATHE_CUDA_MASK_LOOKUP_LATE, _MASK_CACHE and _SAMPLER_MASKS all 0) and from a mask
// cache of two slots, which a step of three rows overflows and every step evicts from.
#include <QtTest>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cuda_runner_test_util.h"
#include "cuda_test_util.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema_regex.h"
#include "engine/grammar/token_vocabulary.h"
#include "fake_byte_tokenizer.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "age", "ok"]
})";

// Id 0 is the end token; ids 1..255 single bytes; then pieces of JSON text (283 tokens).
const FakeByteTokenizer& tokenizer() {
  static const FakeByteTokenizer t({"{\"",   "\":",  "\": ", "\",", ", \"", "\"}", "true",
                                    "false", "null", "name", "age", "12",   "345", "\"\n",
                                    " {",    "},",   "[\"",  "\"]", "\\u",  "\\n", "é",
                                    "ab",    "abc",  "-1",   "0.5", "e+",   "\"a"});
  return t;
}

// Whether `text` is a complete document valid under kSchema (checked directly, not through the
// grammar that produced it).
bool valid_under_schema(const std::string& text, std::string* why) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  if (j.size() != 3 || !j.contains("name") || !j.contains("age") || !j.contains("ok")) {
    *why = "not exactly the keys name, age, ok";
    return false;
  }
  // maxLength counts code points: count the UTF-8 lead bytes.
  if (!j["name"].is_string()) {
    *why = "name is not a string";
    return false;
  }
  size_t chars = 0;
  for (unsigned char c : j["name"].get<std::string>()) chars += (c & 0xC0) != 0x80;
  if (chars > 6 || !j["age"].is_number_integer() || j["age"].get<int64_t>() < 0 ||
      j["age"].get<int64_t>() > 150 || !j["ok"].is_boolean()) {
    *why = "a value outside the schema";
    return false;
  }
  return true;
}

}  // namespace

class CudaRunnerGuidedTest : public QObject {
  Q_OBJECT
 private slots:
  void constrained_lookahead_matches_plain_steps() {
    LATHE_REQUIRE_GPU();
    auto m = load_fixture("qwen3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    const int64_t v = m.value().config.vocab_size;
    QVERIFY(tokenizer().vocab_size() <= v);
    const Result<std::string> regex = json_schema_to_regex(nlohmann::ordered_json::parse(kSchema));
    LATHE_QVERIFY_RESULT(regex);
    auto vocab = std::make_shared<const TokenVocabulary>(tokenizer());
    auto grammar = GrammarConstraint::create(regex.value(), vocab);
    LATHE_QVERIFY_RESULT(grammar);
    GrammarConstraint& g = *grammar.value();
    const std::vector<TokenId> end_ids = {0};

    auto ahead = make_cuda(m.value(), 64, false, 4);
    auto plain = make_cuda(m.value(), 64, false, 0);
    CudaSwitches before;
    before.mask_lookup_late = before.mask_cache = before.sampler_masks = false;
    auto old_path = make_cuda(m.value(), 64, false, 0, before);
    auto tiny_cache = make_cuda(m.value(), 64, false, 4, {}, 2);
    LATHE_QVERIFY_RESULT(ahead);
    LATHE_QVERIFY_RESULT(plain);
    LATHE_QVERIFY_RESULT(old_path);
    LATHE_QVERIFY_RESULT(tiny_cache);
    auto* tr = dynamic_cast<cuda::CudaModelRunner*>(tiny_cache.value().get());
    QVERIFY(tr != nullptr);
    auto* ar = dynamic_cast<cuda::CudaModelRunner*>(ahead.value().get());
    QVERIFY(ar != nullptr);
    const auto all = synthetic_prompts(v);
    // The schema's longest document is under 80 tokens of this vocabulary.
    constexpr int kSteps = 90;
    for (size_t batch = 1; batch <= 3; ++batch) {
      for (bool greedy : {true, false}) {
        std::vector<std::vector<TokenId>> prompts(all.begin(),
                                                  all.begin() + static_cast<ptrdiff_t>(batch));
        Batch b(prompts);
        std::vector<int32_t> state(batch, g.start());
        std::vector<std::string> text(batch);
        std::vector<bool> ended(batch, false);
        const int64_t hits0 = ar->lookahead_hits(), misses0 = ar->lookahead_misses();
        for (int step = 0; step <= kSteps; ++step) {
          ModelInput in = b.step(16);
          for (size_t s = 0; s < batch; ++s) {
            SamplingRow& row = in.sampling[s];
            row.temperature = greedy ? 0.f : 0.9f;
            row.top_p = 0.95f;
            row.seed = 11 + s;
            row.step = b.tokens[s].size() - prompts[s].size();
            if ((s + step) % 2 == 0) {
              row.allowed = g.allowed(state[s], end_ids);
            } else {  // left to the runner, as the engine does
              row.constraint = &g;
              row.constraint_state = state[s];
              row.constraint_end_ids = end_ids;
            }
          }
          in.next_step_continues = step > 0 && step < kSteps;
          auto oa = ahead.value()->execute(in);
          auto op = plain.value()->execute(in);
          auto oo = old_path.value()->execute(in);
          auto ot = tiny_cache.value()->execute(in);
          LATHE_QVERIFY_RESULT(oa);
          LATHE_QVERIFY_RESULT(op);
          LATHE_QVERIFY_RESULT(oo);
          LATHE_QVERIFY_RESULT(ot);
          std::vector<TokenId> next;
          for (size_t s = 0; s < batch; ++s) {
            const TokenId t = op.value().tokens[s].token;
            QCOMPARE(oa.value().tokens[s].token, t);
            QCOMPARE(oo.value().tokens[s].token, t);
            QCOMPARE(ot.value().tokens[s].token, t);
            const TokenMask& mask = *row_mask(in.sampling[s]);
            const size_t w = static_cast<size_t>(t) >> 5;
            QVERIFY2(t >= 0 && w < mask.size() && ((mask[w] >> (t & 31)) & 1u) != 0,
                     qPrintable(QString("token %1 outside the mask").arg(t)));
            if (!ended[s]) {
              if (t == 0)
                ended[s] = true;
              else
                text[s] += tokenizer().token_bytes(t);
            }
            state[s] = g.advance(state[s], t);
            next.push_back(t);
          }
          b.advance(next);
        }
        const int64_t hits = ar->lookahead_hits() - hits0;
        const int64_t misses = ar->lookahead_misses() - misses0;
        qInfo("batch %zu %s: %lld hits, %lld misses; %s", batch, greedy ? "greedy" : "random",
              static_cast<long long>(hits), static_cast<long long>(misses), text[0].c_str());
        // Every step but those before a block boundary (and the first and last) is predicted, and
        // taken although its masks differ from the prediction's.
        QVERIFY2(hits >= kSteps / 2, "the predicted steps were not taken");
        QCOMPARE(misses, int64_t{0});
        for (size_t s = 0; s < batch; ++s) {
          QVERIFY2(ended[s], qPrintable(QString("sequence %1 did not end: %2")
                                            .arg(s)
                                            .arg(QString::fromStdString(text[s]))));
          QVERIFY2(g.matches(text[s]), text[s].c_str());
          std::string why;
          QVERIFY2(valid_under_schema(text[s], &why), (why + ": " + text[s]).c_str());
        }
      }
    }
    // Three rows with distinct masks overflow a two-slot cache (packed with the step), and the
    // grammar's states evict each other.
    const cuda::MaskSlotTable& t = tr->mask_slots();
    qInfo("two-slot mask cache: %lld hits, %lld uploads, %lld overflows",
          static_cast<long long>(t.hits()), static_cast<long long>(t.uploads()),
          static_cast<long long>(t.overflows()));
    QVERIFY(t.overflows() > 0 && t.uploads() > 2 && t.hits() > 0);
  }
};

QTEST_GUILESS_MAIN(CudaRunnerGuidedTest)
#include "cuda_runner_guided_test.moc"
