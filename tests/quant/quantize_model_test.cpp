// `lathe quantize` end to end through the engine (engine/quant/quantize_model.h): GGUF outputs load
// with the engine and give logits close to the source's (q8_0 tight, q4_k_m loose but bounded),
// on the transformers fixtures and on a synthetic model whose rows fit the k-quant blocks; HF
// outputs of every calibration-free scheme dequantize, read by the independent numpy reader, to
// the weights Lathe's quantizer gives; tokenizers and configs survive the change of format; bad
// input fails in prepare() with a clear message; a cancelled run leaves nothing behind.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/model/gguf_file.h"
#include "engine/quant/fp8.h"
#include "engine/quant/hf_quant_writer.h"
#include "engine/quant/quantize_model.h"
#include "quant_model_util.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

const std::vector<int32_t> kTokens = {249, 216, 245, 30,  296, 180, 116, 237, 193, 84,
                                      181, 284, 197, 210, 138, 179, 81,  189, 37,  95};
const std::vector<int32_t> kLengths = {5, 11, 20};

Result<QuantizeResult> quantize(const std::string& model, const std::string& out,
                                const std::string& scheme, QuantSchemeRequest extra = {}) {
  QuantizeRequest r;
  r.model = model;
  r.output = out;
  r.scheme = extra;
  r.scheme.scheme = scheme;
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<QuantizeJob> job, QuantizeJob::prepare(r));
  return job->run(nullptr, nullptr);
}

Status prepare_error(const std::string& model, const std::string& out, const std::string& scheme,
                     QuantSchemeRequest extra = {}) {
  QuantizeRequest r;
  r.model = model;
  r.output = out;
  r.scheme = extra;
  r.scheme.scheme = scheme;
  return QuantizeJob::prepare(r).status();
}

bool contains(const Status& s, const char* text) {
  return s.message().find(text) != std::string::npos;
}

}  // namespace

class QuantizeModelTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string synthetic_;

 private slots:
  void initTestCase() {
    synthetic_ = dir_.filePath("synthetic").toStdString();
    LATHE_QVERIFY_OK(test::write_synthetic_model(synthetic_, {}));
  }

  void gguf_logits_follow_the_source_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("scheme");
    QTest::addColumn<double>("bound");
    for (const char* m : {"models/llama_tied", "models/qwen2_tied", "models/qwen3_untied_bf16",
                          "models/llama3_untied_bf16", "models/mistral_f16", "synthetic"}) {
      QTest::addRow("%s_q8_0", m) << QString(m) << "q8_0" << 0.02;
      QTest::addRow("%s_q4_k_m", m) << QString(m) << "q4_k_m" << 0.25;
    }
    QTest::addRow("synthetic_q6_k") << "synthetic"
                                    << "q6_k" << 0.05;
    QTest::addRow("synthetic_q5_k_m") << "synthetic"
                                      << "q5_k_m" << 0.12;
    QTest::addRow("synthetic_q4_0") << "synthetic"
                                    << "q4_0" << 0.25;
  }
  void gguf_logits_follow_the_source() {
    QFETCH(QString, model);
    QFETCH(QString, scheme);
    QFETCH(double, bound);
    const std::string src =
        model == "synthetic" ? synthetic_ : test::fixture_path(model.toStdString());
    const std::string out =
        dir_.filePath(model.replace('/', '_') + "_" + scheme + ".gguf").toStdString();
    Result<QuantizeResult> q = quantize(src, out, scheme.toStdString());
    LATHE_QVERIFY_RESULT(q);
    QVERIFY(q->quantized_tensors > 0);
    QCOMPARE(q->output_bytes, static_cast<int64_t>(fs::file_size(out)));
    Result<std::vector<float>> want = test::prefix_logits(src, kTokens, kLengths);
    LATHE_QVERIFY_RESULT(want);
    Result<std::vector<float>> got = test::prefix_logits(out, kTokens, kLengths);
    LATHE_QVERIFY_RESULT(got);
    const double err = test::relative_logit_error(*got, *want);
    QVERIFY2(err <= bound, qPrintable(QString("relative logit error %1 > %2").arg(err).arg(bound)));
    // The file says what it is, as llama-quantize writes it.
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(out);
    LATHE_QVERIFY_RESULT(g);
    QVERIFY((*g)->get_int("general.file_type")->has_value());
    QCOMPARE(*(*g)->get_int("general.quantization_version").value(), int64_t{2});
  }

  void q4_k_m_uses_llama_cpps_mix_on_the_synthetic_model() {
    const std::string out = dir_.filePath("mix.gguf").toStdString();
    LATHE_QVERIFY_RESULT(quantize(synthetic_, out, "q4_k_m"));
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(out);
    LATHE_QVERIFY_RESULT(g);
    auto type = [&](const char* name) { return (*g)->find_tensor(name)->dtype; };
    QCOMPARE(type("output.weight"), DType::kQ6_K);
    QCOMPARE(type("token_embd.weight"), DType::kQ4_K);
    QCOMPARE(type("blk.0.attn_v.weight"), DType::kQ4_K);  // 2 layers: layer 1 is "more bits"
    QCOMPARE(type("blk.1.attn_v.weight"), DType::kQ6_K);
    QCOMPARE(type("blk.1.ffn_down.weight"), DType::kQ6_K);
    QCOMPARE(type("blk.0.ffn_up.weight"), DType::kQ4_K);
    QCOMPARE(type("blk.0.attn_norm.weight"), DType::kF32);
    // llama.cpp's tensor order: globals by name, then block by block.
    QCOMPARE((*g)->tensors()[0].name, std::string("output.weight"));
    QCOMPARE((*g)->tensors()[3].name, std::string("blk.0.attn_k.weight"));
    // gguf-py reads it and sees the same types.
    if (test::quant_venv_python().empty()) return;
    const test::ProcessResult r =
        test::run_python_script("read_gguf.py", {QString::fromStdString(out)});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["metadata"].toObject()["general.file_type"].toInt(), 15);
    QCOMPARE(j["metadata"].toObject()["tokenizer.ggml.model"].toString(), QString("gpt2"));
    for (const QJsonValue& t : j["tensors"].toArray()) {
      const QJsonObject o = t.toObject();
      QCOMPARE(o["type"].toString().toStdString(),
               std::string(dtype_name(type(qPrintable(o["name"].toString())))));
    }
  }

  void hf_tokenizer_and_template_survive_gguf() {
    const std::string src = test::fixture_path("model/tiny_llama");
    const std::string out = dir_.filePath("tok.gguf").toStdString();
    LATHE_QVERIFY_RESULT(quantize(src, out, "q8_0"));
    Result<LoadedModel> a = load_model(src);
    LATHE_QVERIFY_RESULT(a);
    Result<LoadedModel> b = load_model(out);
    LATHE_QVERIFY_RESULT(b);
    for (const char* text : {"Hello world", "  spaces and 123 digits!\n<|im_start|>user", "héllo"})
      QCOMPARE(b->tokenizer->encode(text), a->tokenizer->encode(text));
    QCOMPARE(b->chat_template, a->chat_template);
    QCOMPARE(b->config.num_layers, a->config.num_layers);
    QCOMPARE(b->config.rope_style, RopeStyle::kInterleaved);  // llama GGUF: permuted Q/K rows
  }

  void gguf_sources_read_in_hf_row_order() {
    // tiny_llama.gguf is the tiny_llama folder converted by llama.cpp's rules (Q/K rows permuted,
    // q4_0): read back, its rows line up with the folder's again.
    Result<QuantSource> g = QuantSource::open(test::fixture_path("model/tiny_llama.gguf"));
    Result<QuantSource> h = QuantSource::open(test::fixture_path("model/tiny_llama"));
    LATHE_QVERIFY_RESULT(g);
    LATHE_QVERIFY_RESULT(h);
    for (const char* name : {"blk.0.attn_q", "blk.1.attn_k", "blk.0.attn_v", "blk.1.ffn_down"}) {
      Result<std::vector<float>> a = g->read(name);
      Result<std::vector<float>> b = h->read(name);
      LATHE_QVERIFY_RESULT(a);
      LATHE_QVERIFY_RESULT(b);
      QCOMPARE(a->size(), b->size());
      float worst = 0;
      for (size_t i = 0; i < a->size(); ++i) worst = std::max(worst, std::fabs((*a)[i] - (*b)[i]));
      QVERIFY2(worst < 0.1f, qPrintable(QString("%1: max |diff| %2").arg(name).arg(worst)));
    }
  }

  void gguf_to_gguf_keeps_the_metadata() {
    const std::string src = test::fixture_path("model/tiny_llama.gguf");
    const std::string out = dir_.filePath("requant.gguf").toStdString();
    LATHE_QVERIFY_RESULT(quantize(src, out, "q8_0"));
    Result<std::shared_ptr<const GgufFile>> a = GgufFile::open(src);
    Result<std::shared_ptr<const GgufFile>> b = GgufFile::open(out);
    LATHE_QVERIFY_RESULT(a);
    LATHE_QVERIFY_RESULT(b);
    for (const auto& [key, value] : (*a)->metadata())
      QVERIFY2((*b)->find(key) != nullptr, key.c_str());
    QCOMPARE(*(*b)->get_int("general.file_type").value(), int64_t{7});
    Result<std::vector<float>> want = test::prefix_logits(src, kTokens, kLengths);
    Result<std::vector<float>> got = test::prefix_logits(out, kTokens, kLengths);
    LATHE_QVERIFY_RESULT(want);
    LATHE_QVERIFY_RESULT(got);
    const double err = test::relative_logit_error(*got, *want);
    QVERIFY2(err < 0.02, qPrintable(QString::number(err)));
  }

  void hf_outputs_read_back_with_the_reference_reader_data() {
    QTest::addColumn<QString>("source");
    QTest::addColumn<QString>("scheme");
    QTest::addColumn<QString>("format");
    QTest::addColumn<int>("bits");
    QTest::addColumn<int>("group");
    QTest::addColumn<int>("sym");
    QTest::newRow("rtn_ct_int4") << "synthetic"
                                 << "rtn"
                                 << "" << -1 << 0 << -1;
    QTest::newRow("rtn_ct_int4_asym_g64") << "synthetic"
                                          << "rtn"
                                          << "compressed-tensors" << 4 << 64 << 0;
    QTest::newRow("rtn_ct_int8_channel") << "synthetic"
                                         << "rtn"
                                         << "" << 8 << -1 << 1;
    QTest::newRow("rtn_gptq_int4") << "synthetic"
                                   << "rtn"
                                   << "gptq" << 4 << 128 << 1;
    QTest::newRow("rtn_gptq_int4_asym") << "synthetic"
                                        << "rtn"
                                        << "gptq" << 4 << 32 << 0;
    QTest::newRow("rtn_gptq_int8") << "synthetic"
                                   << "rtn"
                                   << "gptq" << 8 << 128 << 1;
    QTest::newRow("rtn_awq") << "synthetic"
                             << "rtn"
                             << "awq" << 4 << 128 << 0;
    QTest::newRow("fp8_dynamic") << "synthetic"
                                 << "fp8-dynamic"
                                 << "" << -1 << 0 << -1;
    QTest::newRow("fp8_block") << "synthetic"
                               << "fp8-block"
                               << "" << -1 << 0 << -1;
    QTest::newRow("int8_w8a16") << "synthetic"
                                << "int8-w8a16"
                                << "" << -1 << 0 << -1;
    QTest::newRow("gguf_source_rtn") << "model/tiny_llama.gguf"
                                     << "rtn"
                                     << "" << 4 << 32 << -1;
  }
  void hf_outputs_read_back_with_the_reference_reader() {
    QFETCH(QString, source);
    QFETCH(QString, scheme);
    QFETCH(QString, format);
    QFETCH(int, bits);
    QFETCH(int, group);
    QFETCH(int, sym);
    const std::string src =
        source == "synthetic" ? synthetic_ : test::fixture_path(source.toStdString());
    const std::string out =
        dir_.filePath(QString("hf_%1").arg(QTest::currentDataTag())).toStdString();
    QuantSchemeRequest req;
    req.bits = bits;
    req.group_size = group;
    req.symmetric = sym;
    req.format = format.toStdString();
    Result<QuantizeResult> q = quantize(src, out, scheme.toStdString(), req);
    LATHE_QVERIFY_RESULT(q);
    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
      QVERIFY2(fs::exists(out + "/" + f), f);
    if (format == "gptq") QVERIFY(fs::exists(out + "/quantize_config.json"));
    if (format == "awq") QVERIFY(fs::exists(out + "/quant_config.json"));
    // What Lathe says it wrote: the same quantization of the same source tensors.
    Result<QuantSource> s = QuantSource::open(src);
    LATHE_QVERIFY_RESULT(s);
    req.scheme = scheme.toStdString();
    Result<QuantScheme> sch = resolve_quant_scheme(req, hf_output_dtype(*s));
    LATHE_QVERIFY_RESULT(sch);
    std::vector<SafetensorsTensorSpec> specs;
    std::vector<std::vector<float>> values;
    for (const ExpectedTensor& t : expected_tensors(s->config())) {
      Result<std::vector<float>> w = s->read(t.name);
      LATHE_QVERIFY_RESULT(w);
      std::vector<float> v;
      if (!is_quantized_linear(t.name)) {
        v = *w;  // kept in 16 bits
        for (float& x : v)
          x = hf_output_dtype(*s) == DType::kF16 ? f16_to_f32(f32_to_f16(x))
                                                 : bf16_to_f32(f32_to_bf16(x));
      } else if (sch->kind == QuantKind::kFp8) {
        v = dequantize_fp8(quantize_fp8(w->data(), t.shape[0], t.shape[1], sch->fp8));
      } else {
        Result<IntQuantizedMatrix> iq =
            quantize_int_rtn(w->data(), t.shape[0], t.shape[1], sch->int_config);
        LATHE_QVERIFY_RESULT(iq);
        v = dequantize_int(*iq);
      }
      specs.push_back({hf_name_from_canonical(t.name), "F32", t.shape});
      values.push_back(std::move(v));
    }
    // Lathe loads what it wrote (issue 13): its logits equal those of a dense f32 folder of the
    // values it says it wrote (the reader decodes exactly these values).
    const std::string dense = out + ".dense";
    {
      fs::create_directories(dense);
      nlohmann::json c = nlohmann::json::parse(std::ifstream(out + "/config.json"));
      c.erase("quantization_config");
      LATHE_QVERIFY_OK(write_small_file(dense + "/config.json", c.dump()));
      Result<SafetensorsWriter> dw = SafetensorsWriter::create(dense + "/model.safetensors", specs);
      LATHE_QVERIFY_RESULT(dw);
      for (size_t i = 0; i < specs.size(); ++i)
        LATHE_QVERIFY_OK(dw->write(specs[i].name, values[i].data(), values[i].size() * 4));
      LATHE_QVERIFY_OK(dw->finish());
    }
    Result<std::vector<float>> got = test::prefix_logits(out, kTokens, kLengths);
    Result<std::vector<float>> want = test::prefix_logits(dense, kTokens, kLengths);
    LATHE_QVERIFY_RESULT(got);
    LATHE_QVERIFY_RESULT(want);
    QVERIFY2(*got == *want,
             qPrintable(
                 QString("relative logit error %1").arg(test::relative_logit_error(*got, *want))));

    if (test::quant_venv_python().empty())
      QSKIP("the reference reader needs scripts/fetch-quant-tools.sh's venv");
    const std::string exp = out + ".expected.safetensors";
    Result<SafetensorsWriter> ew = SafetensorsWriter::create(exp, specs);
    LATHE_QVERIFY_RESULT(ew);
    for (size_t i = 0; i < specs.size(); ++i)
      LATHE_QVERIFY_OK(ew->write(specs[i].name, values[i].data(), values[i].size() * 4));
    LATHE_QVERIFY_OK(ew->finish());
    const test::ProcessResult r = test::run_python_script(
        "read_quantized_folder.py", {QString::fromStdString(out), QString::fromStdString(exp)});
    QVERIFY2(r.exit_code == 0, qPrintable(r.out + r.err));
    QCOMPARE(QJsonDocument::fromJson(r.out.toUtf8()).object()["checked"].toInt(),
             int(specs.size()));
  }

  void gguf_source_gives_an_hf_tokenizer_and_config() {
    const std::string src = test::fixture_path("model/tiny_llama.gguf");
    const std::string out = dir_.filePath("from_gguf_fp8").toStdString();
    LATHE_QVERIFY_RESULT(quantize(src, out, "fp8-dynamic"));
    // Load the written tokenizer and config as Lathe's HF loader does (the weights are quantized,
    // so load the folder with a plain config copy).
    const std::string plain = dir_.filePath("from_gguf_plain").toStdString();
    fs::create_directory(plain);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(out + "/" + f, plain + "/" + f);
    nlohmann::json c = nlohmann::json::parse(std::ifstream(out + "/config.json"));
    c.erase("quantization_config");
    LATHE_QVERIFY_OK(write_small_file(plain + "/config.json", c.dump()));
    LoadOptions dummy;
    dummy.load_format = LoadFormat::kDummy;
    Result<LoadedModel> a = load_model(src);
    Result<LoadedModel> b = load_model(plain, dummy);
    LATHE_QVERIFY_RESULT(a);
    LATHE_QVERIFY_RESULT(b);
    QVERIFY(b->tokenizer != nullptr);
    for (const char* text : {"Hello world", "  spaces and 123 digits!\n<|im_start|>user", "héllo"})
      QCOMPARE(b->tokenizer->encode(text), a->tokenizer->encode(text));
    QCOMPARE(b->chat_template, a->chat_template);
    QCOMPARE(b->config.hidden_size, a->config.hidden_size);
    QCOMPARE(b->config.num_kv_heads, a->config.num_kv_heads);
    QCOMPARE(b->config.rope_theta, a->config.rope_theta);
    QCOMPARE(b->config.rope_style, RopeStyle::kNeox);  // HF folder: rotate-half rows
    QCOMPARE(b->generation.eos_token_ids, a->generation.eos_token_ids);
  }

  void bad_input_fails_before_work() {
    const std::string out = dir_.filePath("never").toStdString();
    Status s = prepare_error(synthetic_, out, "q3_k_m");
    QVERIFY2(contains(s, "unknown --scheme 'q3_k_m'") && contains(s, "q4_k_m"),
             s.message().c_str());
    QuantSchemeRequest awq_b8;
    awq_b8.bits = 8;
    s = prepare_error(synthetic_, out, "awq", awq_b8);
    QVERIFY2(contains(s, "--scheme awq makes 4-bit weights only"), s.message().c_str());
    QuantSchemeRequest g96;
    g96.group_size = 96;
    s = prepare_error(synthetic_, out, "rtn", g96);
    QVERIFY2(contains(s, "group size 96 does not divide the 256 input columns") &&
                 contains(s, "model.layers.0.self_attn.q_proj"),
             s.message().c_str());
    QuantSchemeRequest awq8;
    awq8.bits = 8;
    awq8.format = "awq";
    s = prepare_error(synthetic_, out, "rtn", awq8);
    QVERIFY2(contains(s, "4-bit"), s.message().c_str());
    QuantSchemeRequest fp8bits;
    fp8bits.bits = 4;
    s = prepare_error(synthetic_, out, "fp8-dynamic", fp8bits);
    QVERIFY2(contains(s, "takes no --bits"), s.message().c_str());
    QuantSchemeRequest gguf_fmt;
    gguf_fmt.format = "gptq";
    s = prepare_error(synthetic_, out, "q8_0", gguf_fmt);
    QVERIFY2(contains(s, "GGUF"), s.message().c_str());
    // The output exists.
    s = prepare_error(synthetic_, synthetic_ + "/config.json", "q8_0");
    QVERIFY2(contains(s, "exists; pass --force"), s.message().c_str());
    // Unsupported source dtypes: one the loader refuses, one it loads but quantization cannot
    // start from.
    for (const char* dtype : {"I8", "F8_E4M3"}) {
      const std::string bad = dir_.filePath(QString("bad_%1").arg(dtype)).toStdString();
      test::SyntheticModel m;
      m.bad_tensor_dtype = dtype;
      LATHE_QVERIFY_OK(test::write_synthetic_model(bad, m));
      s = prepare_error(bad, out, "q8_0");
      QCOMPARE(s.code(), ErrorCode::kUnsupported);
      QVERIFY2(contains(s, "unsupported source") && contains(s, "blk.0.attn_q") &&
                   (contains(s, "i8") || contains(s, "f8_e4m3")),
               s.message().c_str());
    }
    // Not a model at all.
    s = prepare_error(dir_.filePath("nothing").toStdString(), out, "q8_0");
    QCOMPARE(s.code(), ErrorCode::kNotFound);
    QVERIFY(!fs::exists(out));
  }

  void cancelling_leaves_nothing() {
    const std::string out = dir_.filePath("cancelled.gguf").toStdString();
    QuantizeRequest r;
    r.model = synthetic_;
    r.output = out;
    r.scheme.scheme = "q8_0";
    Result<std::unique_ptr<QuantizeJob>> job = QuantizeJob::prepare(r);
    LATHE_QVERIFY_RESULT(job);
    std::atomic<bool> cancel{false};
    int seen = 0;
    Result<QuantizeResult> q = (*job)->run(
        [&](const QuantizeProgress& p) {
          ++seen;
          QVERIFY(p.tensors_total > 0 && p.eta_s >= 0.0);
          if (p.tensors_done == 3) cancel.store(true);
        },
        &cancel);
    QCOMPARE(q.status().code(), ErrorCode::kCancelled);
    QCOMPARE(seen, 3);
    QVERIFY(!fs::exists(out));
    for (const auto& e : fs::directory_iterator(dir_.path().toStdString()))
      QVERIFY2(e.path().string().find(".tmp-") == std::string::npos, e.path().c_str());
  }

  void default_model_still_answers_after_q8_0() {
    const std::string model = test::default_model_path();
    if (!fs::exists(model))
      QSKIP("the default model is not in the cache (scripts/fetch-default-model.sh)");
    const std::string out = dir_.filePath("smollm2-q8_0.gguf").toStdString();
    Result<QuantizeResult> q = quantize(model, out, "q8_0");
    LATHE_QVERIFY_RESULT(q);
    const test::ProcessResult r =
        test::run_process(QString(LATHE_CLI),
                          {"generate", "-m", QString::fromStdString(out), "--chat", "-p",
                           "What is the capital of France?", "--temperature", "0", "-n", "24",
                           "--device", "cpu", "--max-model-len", "512"},
                          300000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Paris"), qPrintable(r.out));
  }
};

QTEST_GUILESS_MAIN(QuantizeModelTest)
#include "quantize_model_test.moc"
