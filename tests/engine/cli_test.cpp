// `lathe generate` and `lathe bench throughput|latency` as a user runs them: exit codes, one-line
// errors, the summary line, and the JSON results. Uses the tiny fixture with --load-format dummy
// (random weights of its config, no tokenizer), and the default model when it is present.
#include <QtTest>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace {

using Run = lathe::test::ProcessResult;

Run run_lathe(const QStringList& args, int timeout_ms = 120000) {
  return lathe::test::run_process(QString(LATHE_CLI), args, timeout_ms);
}

QString fixture() {
  return QString::fromStdString(lathe::test::fixture_path("models/llama_tied"));
}

QStringList dummy_fixture() {
  return {"-m", fixture(), "--load-format", "dummy", "--device", "cpu", "--threads", "2"};
}

// stderr lines that are errors ("[hh:mm:ss] error: ...").
QStringList error_lines(const QString& err) {
  QStringList out;
  for (const QString& line : err.split('\n', Qt::SkipEmptyParts))
    if (line.contains("] error: ")) out << line;
  return out;
}

nlohmann::json read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return nlohmann::json::parse(f.readAll().toStdString(), nullptr, false);
}

}  // namespace

class CliTest : public QObject {
  Q_OBJECT
 private slots:
  void generate_errors_are_one_line_with_a_non_zero_exit() {
    Run r = run_lathe({"generate", "-m", "/nonexistent/model.gguf", "-p", "hi"});
    QVERIFY(r.exit_code != 0);
    QCOMPARE(error_lines(r.err).size(), 1);
    QVERIFY2(r.err.contains("/nonexistent/model.gguf"), qPrintable(r.err));

    r = run_lathe(QStringList{"generate", "-p", "hi"} + dummy_fixture());
    QVERIFY(r.exit_code != 0);
    QCOMPARE(error_lines(r.err).size(), 1);
    QVERIFY2(r.err.contains("no tokenizer"), qPrintable(r.err));

    r = run_lathe(QStringList{"generate", "-p", "hi", "--max-model-len", "100000"} +
                  dummy_fixture());
    QVERIFY(r.exit_code != 0);
    QVERIFY2(r.err.contains("--max-model-len <= 256"), qPrintable(r.err));

    r = run_lathe(QStringList{"generate", "-p", "hi", "--max-num-seqs", "64",
                              "--max-num-batched-tokens", "8"} +
                  dummy_fixture());
    QVERIFY(r.exit_code != 0);
    QVERIFY2(r.err.contains("--max-num-batched-tokens"), qPrintable(r.err));
  }

  void speculative_config_errors_name_the_field() {
    const std::pair<const char*, const char*> cases[] = {
        {"not json", "must be a JSON object"},
        {R"({"method": "eagle", "num_speculative_tokens": 2})", "method must be \"ngram\""},
        {R"({"method": "ngram", "num_speculative_tokens": -2})", "num_speculative_tokens"},
        {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4,
             "prompt_lookup_max": 2})",
         "prompt_lookup_min (4) must be <= prompt_lookup_max (2)"},
        {R"({"method": "ngram", "num_speculative_tokens": "four"})", "must be an integer"},
        {R"({"method": "ngram", "num_speculative_tokens": 2, "model": "x"})", "unknown key"},
    };
    for (const auto& [json, message] : cases) {
      Run r = run_lathe(
          QStringList{"bench", "throughput", "--num-prompts", "1", "--speculative-config", json} +
          dummy_fixture());
      QVERIFY2(r.exit_code != 0, json);
      QCOMPARE(error_lines(r.err).size(), 1);
      QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }
    // A valid one runs (ids only: --load-format dummy has no tokenizer).
    Run ok = run_lathe(QStringList{"bench", "throughput", "--num-prompts", "4", "--input-len", "16",
                                   "--output-len", "8", "--speculative-config",
                                   R"({"method": "ngram", "num_speculative_tokens": 3,
                                       "prompt_lookup_max": 3, "prompt_lookup_min": 1})"} +
                       dummy_fixture());
    QVERIFY2(ok.exit_code == 0, qPrintable(ok.err));
    QVERIFY2(ok.out.contains("Throughput: "), qPrintable(ok.out));
  }

  void bench_throughput_reports_and_writes_json() {
    QTemporaryDir dir;
    const QString json = dir.filePath("throughput.json");
    Run r = run_lathe(QStringList{"bench", "throughput", "--num-prompts", "8", "--input-len", "16",
                                  "--output-len", "4", "--json", json} +
                      dummy_fixture());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Throughput: "), qPrintable(r.out));
    const nlohmann::json j = read_json(json);
    QCOMPARE(j.value("num_requests", 0), 8);
    QCOMPARE(j.value("total_output_tokens", 0), 32);
    QCOMPARE(j.value("total_input_tokens", 0), 128);
    QVERIFY(j.value("requests_per_second", 0.0) > 0.0);

    r = run_lathe(QStringList{"bench", "throughput", "--num-prompts", "2", "--input-len", "300",
                              "--output-len", "4"} +
                  dummy_fixture());
    QVERIFY(r.exit_code != 0);
    QVERIFY2(r.err.contains("exceeds max-model-len 256"), qPrintable(r.err));
  }

  void bench_latency_reports_percentiles() {
    QTemporaryDir dir;
    const QString json = dir.filePath("latency.json");
    Run r = run_lathe(QStringList{"bench", "latency", "--batch-size", "2", "--input-len", "8",
                                  "--output-len", "4", "--num-iters-warmup", "1", "--num-iters",
                                  "2", "--json", json} +
                      dummy_fixture());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Avg latency: ") && r.out.contains("99% percentile latency"),
             qPrintable(r.out));
    const nlohmann::json j = read_json(json);
    QCOMPARE(j["latencies"].size(), size_t{2});
    QVERIFY(j.value("avg_latency", 0.0) > 0.0);
    QVERIFY(j["tpot_s"].value("mean", 0.0) > 0.0);
  }

  // --guided-json / --guided-regex: the batch runs unconstrained, then constrained, and the
  // overhead is reported (issue 18's per-step figure); each kind of bad input is one error line.
  void bench_latency_reports_the_constrained_decoding_overhead() {
    const std::string model = lathe::test::default_model_path();
    if (!std::filesystem::exists(model)) QSKIP("the default model is not in the cache");
    QTemporaryDir dir;
    const QString schema = dir.filePath("schema.json");
    {
      QFile f(schema);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(R"({"type":"object","properties":{"name":{"type":"string"},)"
              R"("age":{"type":"integer","minimum":0}},"required":["name","age"]})");
    }
    const QStringList engine{"-m", QString::fromStdString(model), "--device", "cpu", "--threads",
                             "2"};
    const QStringList batch{
        "bench",        "latency", "--batch-size",       "2", "--input-len", "8",
        "--output-len", "6",       "--num-iters-warmup", "0", "--num-iters", "1"};
    const QString json = dir.filePath("guided.json");
    Run r = run_lathe(batch + QStringList{"--guided-json", schema, "--json", json} + engine);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Constrained-decoding overhead: TPOT"), qPrintable(r.out));
    const nlohmann::json j = read_json(json);
    QVERIFY(j["unconstrained"]["tpot_s"].value("mean", 0.0) > 0.0);
    QVERIFY(j["constrained"]["tpot_s"].value("mean", 0.0) > 0.0);
    QVERIFY(j.contains("tpot_overhead"));

    struct Bad {
      QStringList args;
      const char* says;
    };
    const QString not_json = dir.filePath("not.json");
    {
      QFile f(not_json);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("{type: object");
    }
    const QString bad_schema = dir.filePath("bad_schema.json");
    {
      QFile f(bad_schema);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(R"({"type":"frobnicate"})");
    }
    const Bad bad[] = {
        {{"--guided-json", dir.filePath("missing.json")}, "cannot open"},
        {{"--guided-json", not_json}, "is not JSON"},
        {{"--guided-json", bad_schema}, "--guided-json: "},
        {{"--guided-regex", "[a-"}, "--guided-regex: "},
        {{"--guided-json", schema, "--guided-regex", "a+"}, "not both"},
    };
    for (const Bad& b : bad) {
      Run e = run_lathe(batch + b.args + engine);
      QVERIFY2(e.exit_code != 0, qPrintable(b.args.join(' ')));
      QCOMPARE(error_lines(e.err).size(), 1);
      QVERIFY2(e.err.contains(b.says), qPrintable(e.err));
    }
    // A model without a tokenizer (dummy weights of a bare config) cannot be constrained.
    Run none = run_lathe(batch + QStringList{"--guided-regex", "a+"} + dummy_fixture());
    QVERIFY(none.exit_code != 0);
    QVERIFY2(none.err.contains("needs the model's tokenizer"), qPrintable(none.err));
  }

  // --quantization (shared by generate, serve and bench) quantizes at load and says so.
  void quantization_flag_quantizes_at_load() {
    for (const char* mode : {"fp8", "int8", "int4"}) {
      Run r = run_lathe(QStringList{"bench", "latency", "--batch-size", "2", "--input-len", "8",
                                    "--output-len", "2", "--num-iters-warmup", "0", "--num-iters",
                                    "1", "--quantization", mode} +
                        dummy_fixture());
      QVERIFY2(r.exit_code == 0, qPrintable(r.err));
      QVERIFY2(r.err.contains(QString("--quantization %1").arg(mode)), qPrintable(r.err));
    }
    Run bad = run_lathe(QStringList{"bench", "latency", "--quantization", "nf4"} + dummy_fixture());
    QVERIFY(bad.exit_code != 0);
    QVERIFY2(bad.err.contains("--quantization"), qPrintable(bad.err));
    // A checkpoint that is already quantized is refused by name.
    const QString gguf = QString::fromStdString(lathe::test::fixture_path("model/tiny_llama.gguf"));
    Run q = run_lathe(
        {"generate", "-m", gguf, "-p", "hi", "--device", "cpu", "--quantization", "int8"});
    QVERIFY(q.exit_code != 0);
    QCOMPARE(error_lines(q.err).size(), 1);
    QVERIFY2(q.err.contains("without --quantization"), qPrintable(q.err));
    // GGUF types give random weights (--load-format dummy) on the CUDA backend only.
    Run real = run_lathe(
        {"generate", "-m", gguf, "-p", "hi", "--device", "cpu", "--quantization", "q4_k_m"});
    QVERIFY(real.exit_code != 0);
    QCOMPARE(error_lines(real.err).size(), 1);
    QVERIFY2(real.err.contains("needs --load-format dummy"), qPrintable(real.err));
    Run cpu =
        run_lathe(QStringList{"bench", "latency", "--quantization", "q8_0"} + dummy_fixture());
    QVERIFY(cpu.exit_code != 0);
    QVERIFY2(cpu.err.contains("CUDA backend only"), qPrintable(cpu.err));
  }

  // End to end on real quantized weights: Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Q4_K, Q6_K, Q5_0 and
  // Q8_0 blocks), fetched by scripts/fetch-qwen-coder-model.sh (not by CI: the test skips without
  // it), answers a factual question, greedy, on the CPU.
  void quantized_gguf_answers_a_factual_question() {
    const char* dir = std::getenv("LATHE_MODEL_DIR");
    const std::string base =
        dir != nullptr ? dir : std::string(std::getenv("HOME")) + "/.cache/lathe/models";
    const std::string model = base + "/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf";
    if (!std::filesystem::exists(model))
      QSKIP(
          "Qwen2.5-Coder-0.5B-Instruct Q4_K_M is not in the model cache; run "
          "scripts/fetch-qwen-coder-model.sh");
    Run info = run_lathe({"inspect", QString::fromStdString(model)});
    QVERIFY2(info.exit_code == 0, qPrintable(info.err));
    QVERIFY2(info.out.contains("q4_k") && info.out.contains("q6_k"), qPrintable(info.out));
    Run r = run_lathe({"generate", "-m", QString::fromStdString(model), "--chat", "-p",
                       "What is the capital of France? Answer in one word.", "--temperature", "0",
                       "-n", "16", "--device", "cpu", "--max-model-len", "512"},
                      300000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Paris"), qPrintable(r.out));
  }

  void generate_streams_and_ends_with_a_summary_line() {
    const std::string model = lathe::test::default_model_path();
    if (!std::filesystem::exists(model)) QSKIP("the default model is not in the cache");
    Run r =
        run_lathe({"generate", "--chat", "-p", "What is the capital of France?", "--temperature",
                   "0", "-n", "24", "--device", "cpu", "--max-model-len", "512"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Paris"), qPrintable(r.out));
    const QStringList lines = r.err.split('\n', Qt::SkipEmptyParts);
    QVERIFY(!lines.isEmpty());
    QVERIFY2(lines.last().startsWith("prompt tokens: ") &&
                 lines.last().contains("time to first token") && lines.last().contains("tokens/s"),
             qPrintable(lines.last()));
  }
};

QTEST_GUILESS_MAIN(CliTest)
#include "cli_test.moc"
