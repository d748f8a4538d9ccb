// ModelConfig from config.json (the six published configs, transformers 4 and 5 layouts, bad files)
// and from GGUF metadata; RoPE inverse frequencies against transformers.
#include <QtTest>

#include <cmath>

#include "engine/model/gguf_file.h"
#include "engine/model/model_config_parse.h"
#include "model_test_files.h"
#include "test_support.h"

using namespace lathe;
using lathe::test::GgufBuilder;

namespace {

Result<ModelConfig> parse(const std::string& json) {
  return parse_hf_config(json, "/models/x/config.json");
}

// A minimal valid config with `extra` fields appended (later keys override earlier ones).
std::string config_with(const std::string& model_type, const std::string& extra = "") {
  return R"({"model_type": ")" + model_type +
         R"(", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,)"
         R"( "num_attention_heads": 4, "vocab_size": 100)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

}  // namespace

class ModelConfigTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  static ModelConfig published(const char* name) {
    auto r = load_hf_config(
        lathe::test::fixture_path(std::string("model/configs/") + name + "/config.json"));
    if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
    return r.value();
  }

  static void expect_error(const Result<ModelConfig>& r, ErrorCode code, const std::string& needle,
                           const std::string& file = "/models/x/config.json") {
    QVERIFY2(!r.is_ok(), "expected an error");
    const Status status = r.status();
    const std::string& msg = status.message();
    QVERIFY2(r.status().code() == code, msg.c_str());
    QVERIFY2(msg.find(file) != std::string::npos, msg.c_str());
    QVERIFY2(msg.find(needle) != std::string::npos, msg.c_str());
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  // Parameter counts are transformers' (sum of numel over a model built from the same config).
  void published_configs_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<qint64>("params");
    QTest::addColumn<qint64>("layers");
    QTest::addColumn<qint64>("heads");
    QTest::addColumn<qint64>("kv_heads");
    QTest::addColumn<qint64>("head_dim");
    QTest::newRow("llama-3.1-8b") << "llama-3.1-8b" << qint64{8030261248} << qint64{32}
                                  << qint64{32} << qint64{8} << qint64{128};
    QTest::newRow("llama-3.1-70b") << "llama-3.1-70b" << qint64{70553706496} << qint64{80}
                                   << qint64{64} << qint64{8} << qint64{128};
    QTest::newRow("qwen2.5-7b") << "qwen2.5-7b" << qint64{7615616512} << qint64{28} << qint64{28}
                                << qint64{4} << qint64{128};
    QTest::newRow("qwen2.5-0.5b") << "qwen2.5-0.5b" << qint64{494032768} << qint64{24} << qint64{14}
                                  << qint64{2} << qint64{64};
    QTest::newRow("qwen3-14b") << "qwen3-14b" << qint64{14768307200} << qint64{40} << qint64{40}
                               << qint64{8} << qint64{128};
    QTest::newRow("smollm2-135m") << "smollm2-135m" << qint64{134515008} << qint64{30} << qint64{9}
                                  << qint64{3} << qint64{64};
  }

  void published_configs() {
    QFETCH(QString, name);
    QFETCH(qint64, params);
    QFETCH(qint64, layers);
    QFETCH(qint64, heads);
    QFETCH(qint64, kv_heads);
    QFETCH(qint64, head_dim);
    const ModelConfig c = published(name.toStdString().c_str());
    QCOMPARE(c.num_parameters(), params);
    QCOMPARE(c.num_layers, layers);
    QCOMPARE(c.num_heads, heads);
    QCOMPARE(c.num_kv_heads, kv_heads);
    QCOMPARE(c.head_dim, head_dim);
    QCOMPARE(c.rope_style, RopeStyle::kNeox);
    QCOMPARE(c.weight_dtype, DType::kBF16);
  }

  void published_config_details() {
    const ModelConfig l8 = published("llama-3.1-8b");
    QCOMPARE(l8.arch, Architecture::kLlama);
    QCOMPARE(l8.rope_scaling.type, RopeScalingType::kLlama3);
    QCOMPARE(l8.rope_scaling.factor, 8.0);
    QCOMPARE(l8.rope_scaling.high_freq_factor, 4.0);
    QCOMPARE(l8.rope_scaling.original_max_position_embeddings, int64_t{8192});
    QCOMPARE(l8.rope_theta, 500000.0);
    QCOMPARE(l8.max_position_embeddings, int64_t{131072});
    QVERIFY(!l8.tie_word_embeddings);
    QVERIFY(!l8.attention_bias);

    const ModelConfig q05 = published("qwen2.5-0.5b");
    QCOMPARE(q05.arch, Architecture::kQwen2);
    QVERIFY(q05.attention_bias);  // Qwen2 always has q/k/v biases
    QVERIFY(q05.tie_word_embeddings);
    QCOMPARE(q05.rms_norm_eps, 1e-6);

    const ModelConfig q3 = published("qwen3-14b");
    QCOMPARE(q3.arch, Architecture::kQwen3);
    QVERIFY(q3.qk_norm);
    QVERIFY(!q3.attention_bias);

    const ModelConfig s = published("smollm2-135m");
    QVERIFY(s.tie_word_embeddings);
    QCOMPARE(s.rope_theta, 100000.0);
    QCOMPARE(s.rope_scaling.type, RopeScalingType::kNone);
  }

  void llama3_inverse_frequencies_match_transformers() {
    // transformers' _compute_llama3_parameters for Llama-3.1-8B (computed in float32, hence the
    // 1e-6 relative tolerance against Lathe's double-then-round values).
    const std::vector<float> inv = rope_inverse_frequencies(published("llama-3.1-8b"));
    QCOMPARE(inv.size(), size_t{64});
    const std::pair<int, double> want[] = {{0, 1.0},
                                           {20, 0.016560440883040428},
                                           {30, 0.0013718936825171113},  // smoothed band
                                           {33, 0.0003126936499029398},
                                           {40, 3.428102354519069e-05},  // divided by the factor
                                           {63, 3.068925877869333e-07}};
    for (const auto& [i, v] : want)
      QVERIFY2(std::fabs(inv[static_cast<size_t>(i)] - v) <= 1e-6 * v,
               qPrintable(QString("inv_freq[%1] = %2").arg(i).arg(inv[i], 0, 'g', 12)));
    // Linear scaling divides every frequency; GGUF per-frequency factors divide each one.
    ModelConfig c = published("smollm2-135m");
    const std::vector<float> base = rope_inverse_frequencies(c);
    c.rope_scaling.type = RopeScalingType::kLinear;
    c.rope_scaling.factor = 4.0;
    QCOMPARE(rope_inverse_frequencies(c)[5], base[5] / 4.0f);
    c.rope_scaling.type = RopeScalingType::kNone;
    c.rope_freq_factors.assign(32, 1.0f);
    c.rope_freq_factors[7] = 2.0f;
    QCOMPARE(rope_inverse_frequencies(c)[7], base[7] / 2.0f);
    QCOMPARE(rope_inverse_frequencies(c)[6], base[6]);
  }

  void transformers_layouts() {
    // transformers 5: rope_parameters carries theta and scaling; torch_dtype is "dtype".
    auto v5 = parse(config_with(
        "llama",
        R"("rope_parameters": {"rope_theta": 250000.0, "rope_type": "linear", "factor": 2.0},)"
        R"( "dtype": "float16")"));
    LATHE_QVERIFY_RESULT(v5);
    QCOMPARE(v5->rope_theta, 250000.0);
    QCOMPARE(v5->rope_scaling.type, RopeScalingType::kLinear);
    QCOMPARE(v5->rope_scaling.factor, 2.0);
    QCOMPARE(v5->weight_dtype, DType::kF16);
    // transformers 4: rope_theta at the top, rope_scaling with the old "type" key.
    auto v4 = parse(config_with(
        "llama",
        R"("rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 4}, "torch_dtype": "float32")"));
    LATHE_QVERIFY_RESULT(v4);
    QCOMPARE(v4->rope_theta, 1e6);
    QCOMPARE(v4->rope_scaling.factor, 4.0);
    QCOMPARE(v4->weight_dtype, DType::kF32);
    // The tiny fixture saved by transformers 5.
    auto tiny = load_hf_config(lathe::test::fixture_path("model/tiny_llama/config.json"));
    LATHE_QVERIFY_RESULT(tiny);
    QCOMPARE(tiny->num_parameters(), int64_t{37792});  // tests/fixtures/model/expected.json
    QCOMPARE(tiny->weight_dtype, DType::kF32);
  }

  void defaults_follow_transformers() {
    auto llama = parse(config_with("llama"));
    LATHE_QVERIFY_RESULT(llama);
    QCOMPARE(llama->num_kv_heads, int64_t{4});  // = num_attention_heads
    QCOMPARE(llama->head_dim, int64_t{16});     // hidden / heads
    QCOMPARE(llama->max_position_embeddings, int64_t{2048});
    QCOMPARE(llama->rope_theta, 10000.0);
    QVERIFY(!llama->tie_word_embeddings);
    QCOMPARE(llama->sliding_window, int64_t{0});
    auto null_head_dim =
        parse(config_with("llama", R"("head_dim": null, "num_key_value_heads": 2)"));
    LATHE_QVERIFY_RESULT(null_head_dim);
    QCOMPARE(null_head_dim->head_dim, int64_t{16});
    auto qwen3 = parse(config_with("qwen3"));
    LATHE_QVERIFY_RESULT(qwen3);
    QCOMPARE(qwen3->head_dim, int64_t{128});  // Qwen3Config's default
    QVERIFY(qwen3->qk_norm);
    auto mistral = parse(config_with("mistral", R"("max_position_embeddings": 32768)"));
    LATHE_QVERIFY_RESULT(mistral);
    QCOMPARE(mistral->arch, Architecture::kMistral);
    QCOMPARE(mistral->sliding_window, int64_t{4096});  // MistralConfig's default
    auto mistral_v02 = parse(config_with("mistral", R"("sliding_window": null)"));
    LATHE_QVERIFY_RESULT(mistral_v02);
    QCOMPARE(mistral_v02->sliding_window, int64_t{0});
    auto qwen2_window =
        parse(config_with("qwen2", R"("sliding_window": 4096, "use_sliding_window": false)"));
    LATHE_QVERIFY_RESULT(qwen2_window);
    QCOMPARE(qwen2_window->sliding_window, int64_t{0});
  }

  void missing_required_field() {
    const std::string no_hidden =
        R"({"model_type": "llama", "intermediate_size": 128, "num_hidden_layers": 2,)"
        R"( "num_attention_heads": 4, "vocab_size": 100})";
    expect_error(parse(no_hidden), ErrorCode::kCorruptFile, "missing required field 'hidden_size'");
    expect_error(parse(R"({"hidden_size": 64})"), ErrorCode::kCorruptFile,
                 "missing required field 'model_type'");
    expect_error(
        parse(config_with("llama", R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})")),
        ErrorCode::kCorruptFile, "rope_scaling.low_freq_factor");
    // The same through a file: the message names that file.
    const std::string path = lathe::test::write_file(
        dir_.path(), "config.json", std::vector<uint8_t>(no_hidden.begin(), no_hidden.end()));
    expect_error(load_hf_config(path), ErrorCode::kCorruptFile, "hidden_size", path);
  }

  void unknown_architecture_lists_supported() {
    expect_error(parse(config_with("gpt2")), ErrorCode::kUnsupported,
                 "model_type 'gpt2' is not supported; supported: llama, mistral, qwen2, qwen3");
  }

  void malformed_and_unsupported_values() {
    expect_error(parse("{not json"), ErrorCode::kCorruptFile, "not valid JSON");
    expect_error(parse("[]"), ErrorCode::kCorruptFile, "JSON object");
    expect_error(parse(config_with("llama", R"("hidden_size": "big")")), ErrorCode::kCorruptFile,
                 "field 'hidden_size' must be an integer");
    expect_error(parse(config_with("llama", R"("tie_word_embeddings": "yes")")),
                 ErrorCode::kCorruptFile, "tie_word_embeddings");
    expect_error(
        parse(config_with("llama", R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0})")),
        ErrorCode::kUnsupported, "'yarn' is not supported");
    expect_error(parse(config_with("llama", R"("hidden_act": "gelu")")), ErrorCode::kUnsupported,
                 "gelu");
    expect_error(parse(config_with("llama", R"("attention_bias": true)")), ErrorCode::kUnsupported,
                 "attention_bias");
    expect_error(parse(config_with("llama", R"("num_key_value_heads": 3)")),
                 ErrorCode::kInvalidArgument, "multiple of num_key_value_heads");
    expect_error(parse(config_with("llama", R"("num_attention_heads": 0)")),
                 ErrorCode::kCorruptFile, "num_attention_heads must be > 0");
    expect_error(parse(config_with("llama", R"("vocab_size": -5)")), ErrorCode::kInvalidArgument,
                 "vocab_size");
  }

  void gguf_default_model() {
    const std::string path = lathe::test::default_model_path();
    if (!QFile::exists(QString::fromStdString(path)))
      QSKIP("default model not fetched (scripts/fetch-default-model.sh)");
    auto g = GgufFile::open(path);
    LATHE_QVERIFY_RESULT(g);
    auto c = config_from_gguf(**g);
    LATHE_QVERIFY_RESULT(c);
    QCOMPARE(c->arch, Architecture::kLlama);
    QCOMPARE(c->rope_style, RopeStyle::kInterleaved);
    QCOMPARE(c->num_layers, int64_t{30});
    QCOMPARE(c->hidden_size, int64_t{576});
    QCOMPARE(c->intermediate_size, int64_t{1536});
    QCOMPARE(c->num_heads, int64_t{9});
    QCOMPARE(c->num_kv_heads, int64_t{3});
    QCOMPARE(c->head_dim, int64_t{64});
    QCOMPARE(c->vocab_size, int64_t{49152});
    QCOMPARE(c->max_position_embeddings, int64_t{8192});
    QCOMPARE(c->rope_theta, 100000.0);
    QVERIFY(std::fabs(c->rms_norm_eps - 1e-5) < 1e-12);
    QVERIFY(c->tie_word_embeddings);
    QVERIFY(!c->attention_bias);
    QCOMPARE(c->weight_dtype, DType::kQ4_1);
    QCOMPARE(c->num_parameters(), int64_t{134515008});  // same as the HF config of SmolLM2-135M
  }

  void gguf_qwen2_fixture() {
    auto g = GgufFile::open(lathe::test::fixture_path("model/tiny_qwen2.gguf"));
    LATHE_QVERIFY_RESULT(g);
    auto c = config_from_gguf(**g);
    LATHE_QVERIFY_RESULT(c);
    QCOMPARE(c->arch, Architecture::kQwen2);
    QCOMPARE(c->rope_style, RopeStyle::kNeox);
    QVERIFY(c->attention_bias);
    QVERIFY(c->tie_word_embeddings);
    QCOMPARE(c->vocab_size, int64_t{300});  // from token_embd.weight (no qwen2.vocab_size key)
    QCOMPARE(c->head_dim, int64_t{8});      // embedding / heads
    QCOMPARE(c->rope_theta, 1e6);
  }

  void gguf_metadata_variants() {
    GgufBuilder b;
    b.llama_metadata(1, 64, 128, 4, 2);
    b.kv_u32("llama.attention.key_length", 32);  // head_dim != hidden / heads
    b.kv_u32("llama.attention.value_length", 32);
    b.kv_string("llama.rope.scaling.type", "linear");
    b.kv_f32("llama.rope.scaling.factor", 2.0f);
    b.kv_u32("llama.vocab_size", 10);
    b.f32_tensor("rope_freqs.weight", {16});
    b.f32_tensor("output.weight", {64, 10});
    b.f32_tensor("blk.0.attn_q_norm.weight", {32});
    auto g = GgufFile::open(lathe::test::write_file(dir_.path(), "variants.gguf", b.build()));
    LATHE_QVERIFY_RESULT(g);
    // rope_freqs is 0, 1, 2, ...: factor 0 is not a valid divisor.
    auto bad = config_from_gguf(**g);
    QVERIFY(!bad.is_ok());
    QVERIFY2(bad.status().message().find("rope_freqs") != std::string::npos,
             bad.status().message().c_str());

    GgufBuilder ok = b;
    ok.tensors[0].data.clear();
    for (int i = 0; i < 16; ++i)
      lathe::test::append<float>(&ok.tensors[0].data, 1.0f + static_cast<float>(i));
    auto g2 = GgufFile::open(lathe::test::write_file(dir_.path(), "variants_ok.gguf", ok.build()));
    LATHE_QVERIFY_RESULT(g2);
    auto c = config_from_gguf(**g2);
    LATHE_QVERIFY_RESULT(c);
    QCOMPARE(c->head_dim, int64_t{32});
    QCOMPARE(c->rope_scaling.type, RopeScalingType::kLinear);
    QCOMPARE(c->rope_scaling.factor, 2.0);
    QCOMPARE(c->rope_freq_factors.size(), size_t{16});
    QCOMPARE(c->rope_freq_factors[3], 4.0f);
    QVERIFY(!c->tie_word_embeddings);  // output.weight exists
    QVERIFY(c->qk_norm);
    QCOMPARE(c->vocab_size, int64_t{10});
  }

  void gguf_missing_key_and_unknown_architecture() {
    GgufBuilder b;
    b.kv_string("general.architecture", "llama");
    b.kv_u32("llama.block_count", 1);
    auto g = GgufFile::open(lathe::test::write_file(dir_.path(), "nokeys.gguf", b.build()));
    LATHE_QVERIFY_RESULT(g);
    expect_error(config_from_gguf(**g), ErrorCode::kCorruptFile,
                 "missing required metadata 'llama.embedding_length'", "nokeys.gguf");

    GgufBuilder c;
    c.kv_string("general.architecture", "gemma2");
    auto g2 = GgufFile::open(lathe::test::write_file(dir_.path(), "gemma.gguf", c.build()));
    LATHE_QVERIFY_RESULT(g2);
    expect_error(
        config_from_gguf(**g2), ErrorCode::kUnsupported,
        "architecture 'gemma2' is not supported; supported: llama (also Mistral), qwen2, qwen3",
        "gemma.gguf");

    GgufBuilder d;
    auto g3 = GgufFile::open(lathe::test::write_file(dir_.path(), "noarch.gguf", d.build()));
    LATHE_QVERIFY_RESULT(g3);
    expect_error(config_from_gguf(**g3), ErrorCode::kCorruptFile, "general.architecture",
                 "noarch.gguf");
  }
};

QTEST_GUILESS_MAIN(ModelConfigTest)
#include "model_config_test.moc"
