// Memory estimates, fit verdicts, and the inspect report (text and JSON with stable keys) that
// `lathe inspect` prints and Lathe Studio's model card shows.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "engine/model/model_config_parse.h"
#include "engine/model/model_report.h"
#include "test_support.h"

using namespace lathe;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

ModelConfig llama8b() {
  auto r = load_hf_config(lathe::test::fixture_path("model/configs/llama-3.1-8b/config.json"));
  if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
  return r.value();
}

QJsonObject parse_json(const std::string& text) {
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(text), &err);
  if (err.error != QJsonParseError::NoError) qFatal("bad JSON: %s", qPrintable(err.errorString()));
  return doc.object();
}

}  // namespace

class ModelReportTest : public QObject {
  Q_OBJECT
 private slots:
  void estimates_for_llama_8b() {
    const MemoryEstimate m = estimate_memory(llama8b(), 0, 8192, 4);
    QCOMPARE(m.num_parameters, int64_t{8030261248});
    QCOMPARE(m.weight_bytes_fp16, int64_t{16060522496});
    QCOMPARE(m.weight_bytes_int8, int64_t{8030261248});
    QCOMPARE(m.weight_bytes_int4, int64_t{4015130624});
    QCOMPARE(m.kv_bytes_per_token_fp16,
             int64_t{131072});  // 2 x 32 layers x 8 KV heads x 128 x 2 bytes
    QCOMPARE(m.kv_bytes_per_token_fp32, int64_t{262144});
    QCOMPARE(m.kv_bytes_fp16, 4 * kGiB);  // 128 KiB x 8192 tokens x 4 sequences
    QCOMPARE(m.kv_bytes_fp32, 8 * kGiB);
    const MemoryEstimate whole = estimate_memory(llama8b(), 0, 0, 0);
    QCOMPARE(whole.max_model_len, int64_t{131072});  // the model's context
    QCOMPARE(whole.num_sequences, int64_t{1});
  }

  void fit_verdicts() {
    FitRequest r;
    r.weight_bytes = 16060522496;  // Llama-3.1-8B in bf16
    r.kv_bytes_per_token = 131072;
    r.max_model_len = 8192;  // 1 GiB of KV per sequence
    r.num_sequences = 8;
    r.int4_weight_bytes = 4015130624;

    r.budget_bytes = 80 * kGiB;
    FitVerdict v = check_fit(r);
    QCOMPARE(v.kind, FitKind::kFits);
    QCOMPARE(v.needed_bytes, r.weight_bytes + 8 * kGiB);
    QVERIFY2(v.message.rfind("fits: needs", 0) == 0, v.message.c_str());

    r.budget_bytes = 20 * kGiB;  // 5.04 GiB left after the weights
    v = check_fit(r);
    QCOMPARE(v.kind, FitKind::kFitsFewerSequences);
    QCOMPARE(v.max_sequences, int64_t{5});
    QVERIFY2(v.message.find("fits 5 of 8 sequences of 8192 tokens") != std::string::npos,
             v.message.c_str());
    QVERIFY2(v.message.find("at most 5163 tokens") != std::string::npos, v.message.c_str());

    r.budget_bytes = 15 * kGiB + kGiB / 2;  // 0.54 GiB left: not one sequence of 8192
    v = check_fit(r);
    QCOMPARE(v.kind, FitKind::kDoesNotFit);
    QCOMPARE(v.max_sequences, int64_t{0});
    QVERIFY(v.max_kv_tokens > 4000 && v.max_kv_tokens < 8192);
    QVERIFY2(v.message.find("use a max model length of at most " +
                            std::to_string(v.max_kv_tokens)) != std::string::npos,
             v.message.c_str());

    r.budget_bytes = 8 * kGiB;  // not even the weights
    v = check_fit(r);
    QCOMPARE(v.kind, FitKind::kDoesNotFit);
    QVERIFY2(v.message.find("the weights alone need 15.0 GiB of 8.00 GiB") != std::string::npos,
             v.message.c_str());
    QVERIFY2(v.message.find("4-bit") != std::string::npos, v.message.c_str());
  }

  void json_of_a_config_only_folder() {
    ReportOptions o;
    o.max_model_len = 8192;
    o.batch = 4;
    o.budget_bytes = 20 * kGiB;
    auto r = inspect_model(lathe::test::fixture_path("model/configs/llama-3.1-8b"), o);
    LATHE_QVERIFY_RESULT(r);
    const QJsonObject j = parse_json(model_report_json(*r));
    // The stable top-level keys, in order (GUI tests compare against them).
    const QStringList keys = {"path",
                              "name",
                              "format",
                              "architecture",
                              "model_type",
                              "parameters",
                              "layers",
                              "hidden_size",
                              "intermediate_size",
                              "heads",
                              "kv_heads",
                              "head_dim",
                              "vocab_size",
                              "context_length",
                              "rms_norm_eps",
                              "rope",
                              "tie_word_embeddings",
                              "attention_bias",
                              "qk_norm",
                              "sliding_window",
                              "weight_dtype",
                              "dtypes",
                              "quantization",
                              "file_bytes",
                              "has_chat_template",
                              "eos_token_ids",
                              "memory"};
    QStringList sorted_keys = keys;
    sorted_keys.sort();
    QCOMPARE(j.keys(), sorted_keys);  // QJsonObject sorts its keys
    QCOMPARE(j["format"].toString(), QString("config"));
    QCOMPARE(j["architecture"].toString(), QString("llama"));
    QCOMPARE(j["parameters"].toInteger(), qint64{8030261248});
    QCOMPARE(j["layers"].toInt(), 32);
    QCOMPARE(j["heads"].toInt(), 32);
    QCOMPARE(j["kv_heads"].toInt(), 8);
    QCOMPARE(j["head_dim"].toInt(), 128);
    QCOMPARE(j["context_length"].toInt(), 131072);
    QCOMPARE(j["weight_dtype"].toString(), QString("bf16"));
    QCOMPARE(j["rope"].toObject()["scaling"].toString(), QString("llama3"));
    QCOMPARE(j["rope"].toObject()["factor"].toDouble(), 8.0);
    QCOMPARE(j["eos_token_ids"].toArray().size(), 3);
    const QJsonObject mem = j["memory"].toObject();
    QCOMPARE(mem["weights"].toObject()["fp16"].toInteger(), qint64{16060522496});
    QCOMPARE(mem["weights"].toObject()["int4"].toInteger(), qint64{4015130624});
    QCOMPARE(mem["weights"].toObject()["stored"].toInteger(), qint64{0});
    QCOMPARE(mem["kv_per_token"].toObject()["fp16"].toInteger(), qint64{131072});
    QCOMPARE(mem["kv"].toObject()["fp16"].toInteger(), 4 * kGiB);
    QCOMPARE(mem["max_model_len"].toInt(), 8192);
    QCOMPARE(mem["batch"].toInt(), 4);
    // CPU plan: 15.0 GiB of bf16 weights leave 5.0 GiB of 20 GiB, 2 GiB of fp32 KV per sequence:
    // 2 of the 4 sequences fit.
    const QJsonObject fit = mem["fit"].toObject();
    QCOMPARE(fit["budget_bytes"].toInteger(), 20 * kGiB);
    QCOMPARE(fit["verdict"].toString(), QString("fits_fewer_sequences"));
    QCOMPARE(fit["max_sequences"].toInt(), 2);
  }

  void hf_folder_report() {
    auto r = inspect_model(lathe::test::fixture_path("model/tiny_llama"), {});
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r->format, std::string("hf"));
    QCOMPARE(r->memory.weight_bytes_stored, int64_t{37792 * 4});  // every parameter stored as f32
    QCOMPARE(r->memory.max_model_len, int64_t{256});
    QVERIFY(r->has_chat_template);
    const QJsonObject j = parse_json(model_report_json(*r));
    QCOMPARE(j["dtypes"].toObject()["attention"].toString(), QString("f32"));
    QCOMPARE(j["memory"].toObject()["fit"].toObject()["verdict"].toString(), QString("fits"));
  }

  void default_model_report() {
    const std::string path = lathe::test::default_model_path();
    if (!QFile::exists(QString::fromStdString(path)))
      QSKIP("default model not fetched (scripts/fetch-default-model.sh)");
    ReportOptions o;
    o.max_model_len = 2048;
    o.batch = 2;
    auto r = inspect_model(path, o);
    LATHE_QVERIFY_RESULT(r);
    const QJsonObject j = parse_json(model_report_json(*r));
    QCOMPARE(j["format"].toString(), QString("gguf"));
    QCOMPARE(j["parameters"].toInteger(), qint64{134515008});
    QCOMPARE(j["rope"].toObject()["style"].toString(), QString("interleaved"));
    QCOMPARE(j["dtypes"].toObject()["embedding"].toString(), QString("q8_0"));
    QCOMPARE(j["dtypes"].toObject()["mlp"].toString(), QString("q4_1"));
    QCOMPARE(j["dtypes"].toObject()["output"].toString(), QString("tied"));
    QCOMPARE(j["file_bytes"].toInteger(), qint64{98362432});
    const QJsonObject mem = j["memory"].toObject();
    const qint64 stored = mem["weights"].toObject()["stored"].toInteger();
    QVERIFY(stored > 90'000'000 && stored < 98362432);
    QCOMPARE(mem["kv_per_token"].toObject()["fp16"].toInteger(), qint64{2 * 30 * 3 * 64 * 2});
    QCOMPARE(mem["kv"].toObject()["fp32"].toInteger(), qint64{2 * 30 * 3 * 64 * 4} * 2048 * 2);

    const std::string text = model_report_text(*r);
    for (const char* needle : {"Parameters    135M (134,515,008)", "30, hidden 576, FFN 1536",
                               "9 heads, 3 KV heads, head dim 64", "embedding q8_0, attention q4_1",
                               "KV / token  22.5 KiB (fp16/bf16), 45.0 KiB (fp32)",
                               "for 2048 tokens x 2 sequences", "Context       8,192 tokens"})
      QVERIFY2(text.find(needle) != std::string::npos,
               (std::string(needle) + " not in:\n" + text).c_str());
  }

  void inspect_errors() {
    auto r = inspect_model("/nonexistent/dir/model.gguf", {});
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::kNotFound);
    QVERIFY(r.status().message().find("/nonexistent/dir/model.gguf") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(ModelReportTest)
#include "model_report_test.moc"
