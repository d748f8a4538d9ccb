// Random weights in GGUF block types (engine/model/dummy_gguf.h), host side:
//  - the --quantization values: GGUF types only with --load-format dummy, unknown values and two
//    quantizations at once refused with messages that say what is accepted;
//  - the block type of each tensor at Llama-3.1-8B's shape (llama.cpp's Q4_K_M mix, the uniform
//    types, the LM head) and the fallbacks of widths the types do not divide;
//  - each type's block template: random quants with its constant scale bytes decode (dequant.h, the
//    reference of every kernel) to finite weights of std ~0.02 and mean within half a code step of
//    0;
//  - the CPU backend refuses a GGUF dummy by name.
#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/model/dequant.h"
#include "engine/model/dummy_gguf.h"
#include "engine/model/model_loader.h"
#include "test_support.h"

using namespace lathe;

namespace {

bool contains(const Status& s, const std::string& needle) {
  return s.message().find(needle) != std::string::npos;
}

Result<LoadedModel> load_dummy(const std::string& config, const std::string& quantization) {
  LoadOptions lo;
  lo.load_format = LoadFormat::kDummy;
  lo.load_tokenizer = false;
  LATHE_RETURN_IF_ERROR(
      parse_quantization_option(quantization, true, &lo.quantization, &lo.dummy_gguf));
  return load_model(test::fixture_path("../../benchmarks/configs/" + config), lo);
}

}  // namespace

class DummyGgufTest : public QObject {
  Q_OBJECT
 private slots:
  void quantization_values_are_parsed() {
    for (const char* name : {"q4_k_m", "q4_k", "q4_0", "q8_0", "q5_k_m", "q6_k", "q4_1", "q5_0",
                             "q5_1", "q2_k", "q3_k"}) {
      OnlineQuant online = OnlineQuant::kNone;
      DummyGguf g;
      LATHE_QVERIFY_OK(parse_quantization_option(name, true, &online, &g));
      QCOMPARE(g.name, std::string(name));
      QVERIFY(online == OnlineQuant::kNone);
    }
    OnlineQuant online = OnlineQuant::kNone;
    DummyGguf g;
    // fp8|int8|int4 quantize real checkpoints too.
    LATHE_QVERIFY_OK(parse_quantization_option("int4", false, &online, &g));
    QVERIFY(online == OnlineQuant::kInt4);
    QVERIFY(!g.active());
    QVERIFY(parse_dummy_gguf("q4_k_s") == std::nullopt);
    QCOMPARE(dummy_gguf_names(),
             std::string("q4_k_m, q4_k, q4_0, q8_0, q5_k_m, q6_k, q4_1, q5_0, q5_1, q2_k, q3_k"));
  }

  void bad_quantization_values_are_refused() {
    OnlineQuant online = OnlineQuant::kNone;
    DummyGguf g;
    // A GGUF type of a real checkpoint: the file is the way to run one.
    const Status real = parse_quantization_option("q4_k_m", false, &online, &g);
    QCOMPARE(static_cast<int>(real.code()), static_cast<int>(ErrorCode::kInvalidArgument));
    QVERIFY2(contains(real, "needs --load-format dummy") && contains(real, "load its file") &&
                 contains(real, "--scheme q4_k_m"),
             real.message().c_str());
    QVERIFY(!g.active());
    // q4_k is no file type: the message names the file type it belongs to.
    const Status q4k = parse_quantization_option("q4_k", false, &online, &g);
    QVERIFY2(contains(q4k, "--scheme q4_k_m"), q4k.message().c_str());
    // q2_k (and q4_1, q5_0, q5_1, q3_k) belong to no file type Lathe writes: load such a file.
    const Status q2k = parse_quantization_option("q2_k", false, &online, &g);
    QVERIFY2(contains(q2k, "needs --load-format dummy") &&
                 contains(q2k, "GGUF file of that type") && !contains(q2k, "--scheme"),
             q2k.message().c_str());
    for (const char* bad : {"nf4", "none", "Q4_K_M", ""}) {
      const Status s = parse_quantization_option(bad, true, &online, &g);
      QCOMPARE(static_cast<int>(s.code()), static_cast<int>(ErrorCode::kInvalidArgument));
      QVERIFY2(contains(s, "fp8, int8 or int4") && contains(s, "q4_k_m, q4_k, q4_0") &&
                   contains(s, std::string("got '") + bad + "'"),
               s.message().c_str());
    }
    QVERIFY(online == OnlineQuant::kNone);
  }

  void loader_refuses_gguf_dummy_of_a_real_load_and_two_quantizations() {
    LoadOptions lo;
    lo.load_tokenizer = false;
    lo.dummy_gguf = *parse_dummy_gguf("q8_0");
    const std::string cfg = test::fixture_path("../../benchmarks/configs/smollm2-135m");
    auto real = load_model(cfg, lo);
    QVERIFY(!real.is_ok());
    QVERIFY2(contains(real.status(), "needs --load-format dummy"), real.status().message().c_str());
    lo.load_format = LoadFormat::kDummy;
    lo.quantization = OnlineQuant::kFp8;
    auto both = load_model(cfg, lo);
    QVERIFY(!both.is_ok());
    QVERIFY2(contains(both.status(), "one --quantization at a time: fp8 or q8_0"),
             both.status().message().c_str());
    lo.quantization = OnlineQuant::kNone;
    auto ok = load_model(cfg, lo);
    LATHE_QVERIFY_RESULT(ok);
    QCOMPARE(ok.value().dummy_gguf.name, std::string("q8_0"));
  }

  // Llama-3.1-8B (32 layers): Q4_K_M's q6_k layers are i < 4, i >= 28 and (i - 4) % 3 == 2.
  void tensor_types_follow_llama_cpp_at_the_8b_shape() {
    auto m = load_dummy("llama-3.1-8b", "q4_k_m");
    LATHE_QVERIFY_RESULT(m);
    const ModelConfig& c = m.value().config;
    const DummyGguf& g = m.value().dummy_gguf;
    auto type = [&](const DummyGguf& f, const char* t, int64_t layer, int64_t k) {
      Result<DType> r = dummy_gguf_type(f, c, t, layer, k);
      if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
      return r.value();
    };
    int q6_down = 0, q6_v = 0;
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
      QCOMPARE(type(g, "ffn_down", i, c.intermediate_size), more ? DType::kQ6_K : DType::kQ4_K);
      QCOMPARE(type(g, "attn_v", i, c.hidden_size), more ? DType::kQ6_K : DType::kQ4_K);
      QCOMPARE(type(g, "attn_q", i, c.hidden_size), DType::kQ4_K);
      QCOMPARE(type(g, "ffn_up", i, c.hidden_size), DType::kQ4_K);
      q6_down += type(g, "ffn_down", i, c.intermediate_size) == DType::kQ6_K;
      q6_v += type(g, "attn_v", i, c.hidden_size) == DType::kQ6_K;
    }
    QCOMPARE(q6_down, 16);
    QCOMPARE(q6_v, 16);
    QCOMPARE(type(g, "output", -1, c.hidden_size), DType::kQ6_K);
    // Uniform q4_k: no q6_k layer; its LM head still q6_k.
    const DummyGguf u = *parse_dummy_gguf("q4_k");
    QCOMPARE(type(u, "ffn_down", 0, c.intermediate_size), DType::kQ4_K);
    QCOMPARE(type(u, "attn_v", 31, c.hidden_size), DType::kQ4_K);
    QCOMPARE(type(u, "output", -1, c.hidden_size), DType::kQ6_K);
    // The 32-weight types: every projection in the type, the LM head q6_k (q8_0 keeps q8_0).
    const DummyGguf q40 = *parse_dummy_gguf("q4_0"), q80 = *parse_dummy_gguf("q8_0");
    QCOMPARE(type(q40, "ffn_down", 0, c.intermediate_size), DType::kQ4_0);
    QCOMPARE(type(q40, "output", -1, c.hidden_size), DType::kQ6_K);
    QCOMPARE(type(q80, "attn_v", 0, c.hidden_size), DType::kQ8_0);
    QCOMPARE(type(q80, "output", -1, c.hidden_size), DType::kQ8_0);
    // Widths a 256-weight type does not divide fall back as llama.cpp does.
    QCOMPARE(type(g, "attn_q", 0, 96), DType::kQ5_0);
    QCOMPARE(type(*parse_dummy_gguf("q6_k"), "attn_q", 0, 96), DType::kQ8_0);
    // ... and where no block type fits (k % 32 != 0), the dummy is refused by tensor.
    for (const DummyGguf& f : {g, u, q40}) {
      Result<DType> bad = dummy_gguf_type(f, c, "attn_q", 3, 100);
      QVERIFY(!bad.is_ok());
      QCOMPARE(static_cast<int>(bad.status().code()), static_cast<int>(ErrorCode::kUnsupported));
      QVERIFY2(contains(bad.status(), "blk.3.attn_q.weight has 100 inputs"),
               bad.status().message().c_str());
    }
  }

  void block_templates_decode_to_the_dummy_spread_data() {
    QTest::addColumn<int>("type");
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                    DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
      QTest::newRow(std::string(dtype_name(t)).c_str()) << static_cast<int>(t);
  }
  void block_templates_decode_to_the_dummy_spread() {
    QFETCH(int, type);
    const DType t = static_cast<DType>(type);
    auto tb = gguf_dummy_block(t);
    LATHE_QVERIFY_RESULT(tb);
    const GgufDummyBlock& b = tb.value();
    QCOMPARE(static_cast<int64_t>(b.block_bytes), dtype_info(t).block_bytes);
    QVERIFY(b.len > 0 && b.offset + b.len <= b.block_bytes);
    // What the device fill writes: random bytes, then the template in every block.
    const int64_t n = 256 * 256;
    const int64_t blocks = n / dtype_info(t).block_size;
    std::vector<uint8_t> bytes(static_cast<size_t>(blocks * b.block_bytes));
    std::mt19937 rng(7);
    for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
    QVERIFY(b.more.len == 0 || b.more.offset + b.more.len <= b.block_bytes);
    for (int64_t i = 0; i < blocks; ++i) {
      std::copy(b.bytes.begin(), b.bytes.begin() + b.len,
                bytes.begin() + i * b.block_bytes + b.offset);
      std::copy(b.more.bytes.begin(), b.more.bytes.begin() + b.more.len,
                bytes.begin() + i * b.block_bytes + b.more.offset);
    }
    std::vector<float> w(static_cast<size_t>(n));
    dequantize_row(t, bytes.data(), w.data(), n);
    double sum = 0, sq = 0;
    for (float x : w) {
      QVERIFY(std::isfinite(x));
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    // The symmetric types' codes sit half a step below their zero (q4_0: mean -d/2 = -0.0022;
    // q3_k, 8 levels: -0.0043).
    QVERIFY2(std::fabs(mean) < (t == DType::kQ3_K ? 4.5e-3 : 2.5e-3),
             qPrintable(QString("mean %1").arg(mean)));
    QVERIFY2(sd > 0.019 && sd < 0.021, qPrintable(QString("std %1").arg(sd)));
  }

  void types_without_a_template_are_refused() {
    for (DType t : {DType::kBF16, DType::kF16, DType::kF32}) {
      auto b = gguf_dummy_block(t);
      QVERIFY(!b.is_ok());
      QVERIFY2(contains(b.status(), std::string(dtype_name(t))), b.status().message().c_str());
    }
  }

  void cpu_backend_refuses_gguf_dummies() {
    auto m = load_dummy("smollm2-135m", "q4_k_m");
    LATHE_QVERIFY_RESULT(m);
    auto r = create_cpu_model_runner(m.value(), CpuRunnerOptions{});
    QVERIFY(!r.is_ok());
    QCOMPARE(static_cast<int>(r.status().code()), static_cast<int>(ErrorCode::kUnsupported));
    QVERIFY2(
        contains(r.status(), "--quantization q4_k_m") && contains(r.status(), "CUDA backend only"),
        r.status().message().c_str());
  }
};

QTEST_GUILESS_MAIN(DummyGgufTest)
#include "dummy_gguf_test.moc"
