// Random-weight GGUF files (engine/quant/dummy_gguf_file.h) and their tool lathe_dummy_gguf, at a
// tiny Llama 3.1-like shape (rope_freqs, grouped-query attention, 8 layers so that q4_k_m's
// use_more_bits layers show): each type's tensors get llama.cpp's mix; the file loads in Lathe and
// its CPU forward gives finite logits; the bytes depend on the seed only (not on the thread count);
// gguf-py reads the same types and finite values (skips without scripts/fetch-quant-tools.sh); a
// real vocabulary (llama.cpp's vocab-only Llama 3 file, scripts/fetch-test-assets.sh; skips
// without it) is copied in, and one of the wrong size is refused; bad command lines and outputs
// fail with a message and leave no file.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "engine/model/dummy_gguf.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_config_parse.h"
#include "engine/model/model_loader.h"
#include "engine/quant/config_export.h"
#include "engine/quant/dummy_gguf_file.h"
#include "engine/quant/tokenizer_export.h"
#include "quant_model_util.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kLayers = 8;

std::string tiny_config_json(int64_t vocab) {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": )" +
         std::to_string(kLayers) +
         R"(, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 64, "vocab_size": )" +
         std::to_string(vocab) + R"(, "max_position_embeddings": 1024, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 256, "rope_type": "llama3"},
    "hidden_act": "silu", "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
    "torch_dtype": "bfloat16"})";
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string vocab_path() {
  const char* env = std::getenv("LATHE_TEST_ASSETS");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string dir =
      env != nullptr && *env != '\0' ? std::string(env)
      : xdg != nullptr && *xdg != '\0'
          ? std::string(xdg) + "/lathe/test-assets"
          : std::string(home != nullptr ? home : ".") + "/.cache/lathe/test-assets";
  return dir + "/llama.cpp-vocab/ggml-vocab-llama-bpe.gguf";
}

}  // namespace

class DummyGgufFileTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  ModelConfig config_;

  std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

  Result<DummyGgufFileReport> write(const std::string& out, GgufFileType t, uint64_t seed = 1,
                                    int threads = 2) {
    DummyGgufFileOptions o;
    o.file_type = t;
    o.seed = seed;
    o.num_threads = threads;
    return write_dummy_gguf_file(config_, out, o);
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    Result<ModelConfig> c = parse_hf_config(tiny_config_json(512), "tiny config.json");
    LATHE_QVERIFY_RESULT(c);
    config_ = *c;
  }

  void each_type_gets_llama_cpps_mix_and_loads() {
    struct Case {
      GgufFileType type;
      DType base, output;
    };
    for (const Case& k : {Case{GgufFileType::kQ4_K_M, DType::kQ4_K, DType::kQ6_K},
                          Case{GgufFileType::kQ8_0, DType::kQ8_0, DType::kQ8_0},
                          Case{GgufFileType::kQ4_0, DType::kQ4_0, DType::kQ6_K}}) {
      const std::string name = gguf_file_type_name(k.type);
      const std::string out = path((name + ".gguf").c_str());
      Result<DummyGgufFileReport> r = write(out, k.type);
      LATHE_QVERIFY_RESULT(r);
      QCOMPARE(r->file_bytes, static_cast<int64_t>(fs::file_size(out)));
      Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(out);
      LATHE_QVERIFY_RESULT(g);
      auto type = [&](const std::string& n) { return (*g)->find_tensor(n)->dtype; };
      QCOMPARE(type("token_embd.weight"), k.base);
      QCOMPARE(type("output.weight"), k.output);
      QCOMPARE(type("output_norm.weight"), DType::kF32);
      QCOMPARE(type("rope_freqs.weight"), DType::kF32);
      for (int64_t i = 0; i < kLayers; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        // q4_k_m: q6_k for attn_v and ffn_down in the use_more_bits layers (0, 3, 6, 7 of 8).
        const bool more = k.type == GgufFileType::kQ4_K_M && (i == 0 || i == 3 || i >= 6);
        QCOMPARE(type(b + "attn_v.weight"), more ? DType::kQ6_K : k.base);
        QCOMPARE(type(b + "ffn_down.weight"), more ? DType::kQ6_K : k.base);
        QCOMPARE(type(b + "attn_q.weight"), k.base);
        QCOMPARE(type(b + "ffn_up.weight"), k.base);
        QCOMPARE(type(b + "attn_norm.weight"), DType::kF32);
      }
      QCOMPARE(*(*g)->get_int("general.file_type").value(),
               static_cast<int64_t>(static_cast<uint32_t>(k.type)));
      QCOMPARE(*(*g)->get_string("general.architecture").value(), std::string("llama"));
      // The report's bytes are the file's tensors'.
      int64_t tensor_bytes = 0;
      for (const GgufTensorInfo& t : (*g)->tensors()) tensor_bytes += t.nbytes;
      QCOMPARE(r->tensor_bytes, tensor_bytes);
      QCOMPARE(r->embedding_bytes, (*g)->find_tensor("token_embd.weight")->nbytes);
      // Lathe reads the same model back, and its CPU forward stays finite.
      Result<ModelConfig> back = config_from_gguf(**g);
      LATHE_QVERIFY_RESULT(back);
      QCOMPARE(back->num_layers, config_.num_layers);
      QCOMPARE(back->vocab_size, config_.vocab_size);
      // rope_freqs holds the config's Llama 3 factors.
      const GgufTensorInfo* rf = (*g)->find_tensor("rope_freqs.weight");
      const std::vector<float> factors = gguf_rope_freq_factors(config_);
      QCOMPARE(rf->nbytes, static_cast<int64_t>(4 * factors.size()));
      QVERIFY(std::memcmp(rf->data, factors.data(), 4 * factors.size()) == 0);
      Result<std::vector<float>> logits = test::prefix_logits(out, {1, 5, 9, 200, 7}, {5});
      LATHE_QVERIFY_RESULT(logits);
      QCOMPARE(static_cast<int64_t>(logits->size()), config_.vocab_size);
      for (float v : *logits) QVERIFY(std::isfinite(v));
      if (test::quant_venv_python().empty()) {
        qWarning("gguf-py check skipped: run scripts/fetch-quant-tools.sh");
        continue;
      }
      // gguf-py (llama.cpp's reader) sees the same types, and dequantizes to finite values.
      const test::ProcessResult p =
          test::run_python_script("read_gguf.py", {QString::fromStdString(out)});
      QVERIFY2(p.exit_code == 0, qPrintable(p.err));
      const QJsonObject j = QJsonDocument::fromJson(p.out.toUtf8()).object();
      QCOMPARE(j["metadata"].toObject()["general.file_type"].toInt(),
               static_cast<int>(static_cast<uint32_t>(k.type)));
      const QJsonArray tensors = j["tensors"].toArray();
      QCOMPARE(static_cast<size_t>(tensors.size()), (*g)->tensors().size());
      for (const QJsonValue& t : tensors) {
        const QJsonObject o = t.toObject();
        QCOMPARE(o["type"].toString().toStdString(),
                 std::string(dtype_name(type(o["name"].toString().toStdString()))));
        QVERIFY2(std::isfinite(o["sum_abs"].toDouble()) && o["sum_abs"].toDouble() > 0,
                 qPrintable(o["name"].toString()));
      }
    }
  }

  void bytes_depend_on_the_seed_not_the_threads() {
    const std::string a = path("a.gguf"), b = path("b.gguf"), c = path("c.gguf");
    LATHE_QVERIFY_RESULT(write(a, GgufFileType::kQ4_K_M, 7, 1));
    LATHE_QVERIFY_RESULT(write(b, GgufFileType::kQ4_K_M, 7, 3));
    LATHE_QVERIFY_RESULT(write(c, GgufFileType::kQ4_K_M, 8, 3));
    const std::string ba = file_bytes(a), bb = file_bytes(b), bc = file_bytes(c);
    QVERIFY(ba == bb);
    QCOMPARE(bc.size(), ba.size());
    QVERIFY(bc != ba);
    // Every q4_k block keeps the engine's dummy scales: d and dmin as gguf_dummy_block sets them.
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(a);
    LATHE_QVERIFY_RESULT(g);
    const GgufTensorInfo* t = (*g)->find_tensor("blk.1.ffn_up.weight");
    QCOMPARE(t->dtype, DType::kQ4_K);
    Result<GgufDummyBlock> tpl = gguf_dummy_block(DType::kQ4_K);
    LATHE_QVERIFY_RESULT(tpl);
    const uint8_t* data = t->data;
    std::set<std::string> quants;
    for (int64_t blk = 0; blk < t->nbytes / 144; ++blk) {
      const uint8_t* p = data + blk * 144;
      QVERIFY(std::memcmp(p + tpl->offset, tpl->bytes.data(), tpl->len) == 0);
      quants.insert(std::string(reinterpret_cast<const char*>(p + 16), 128));
    }
    QCOMPARE(static_cast<int64_t>(quants.size()), t->nbytes / 144);  // random: all differ
  }

  void a_real_vocabulary_is_copied_and_a_wrong_size_refused() {
    const std::string vocab = vocab_path();
    if (!fs::exists(vocab)) QSKIP("no llama.cpp vocab files: run scripts/fetch-test-assets.sh");
    Result<GgufMetadata> wrong = gguf_tokenizer_metadata_from_gguf(vocab, config_.vocab_size);
    QVERIFY(!wrong.is_ok());
    QCOMPARE(wrong.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(wrong.status().message().find("128256 tokens") != std::string::npos,
             wrong.status().message().c_str());
    QVERIFY(wrong.status().message().find("512 rows") != std::string::npos);

    Result<ModelConfig> c = parse_hf_config(tiny_config_json(128256), "config.json");
    LATHE_QVERIFY_RESULT(c);
    DummyGgufFileOptions o;
    o.file_type = GgufFileType::kQ8_0;
    Result<GgufMetadata> tok = gguf_tokenizer_metadata_from_gguf(vocab, c->vocab_size);
    LATHE_QVERIFY_RESULT(tok);
    o.tokenizer = *tok;
    const std::string out = path("vocab.gguf");
    LATHE_QVERIFY_RESULT(write_dummy_gguf_file(*c, out, o));
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(out);
    LATHE_QVERIFY_RESULT(g);
    QCOMPARE(*(*g)->get_string("tokenizer.ggml.pre").value(), std::string("llama-bpe"));
    QCOMPARE((*g)->get_string_array("tokenizer.ggml.tokens")->size(), size_t{128256});
    // With its tokenizer, the whole model loads and encodes as Llama 3 does.
    Result<LoadedModel> m = load_model(out);
    LATHE_QVERIFY_RESULT(m);
    QVERIFY(m->tokenizer != nullptr);
    QVERIFY(!m->tokenizer->encode("Hello world").empty());
  }

  void an_output_that_cannot_be_written_fails_with_its_name() {
    const std::string out = path("no/such/folder/x.gguf");
    Result<DummyGgufFileReport> r = write(out, GgufFileType::kQ8_0);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.status().message().find(out) != std::string::npos, r.status().message().c_str());
    QVERIFY(!fs::exists(out));
    // A device takes the bytes (timing the generation alone) and stays what it is.
    LATHE_QVERIFY_RESULT(write("/dev/null", GgufFileType::kQ8_0));
    QVERIFY(fs::is_character_file("/dev/null"));
  }

  void the_tool_writes_a_file_and_refuses_bad_command_lines() {
    const QString tool = LATHE_DUMMY_GGUF;
    const std::string cfg_dir = path("cfg");
    fs::create_directories(cfg_dir);
    LATHE_QVERIFY_OK(write_small_file(cfg_dir + "/config.json", tiny_config_json(512)));
    const QString out = dir_.filePath("tool.gguf");
    test::ProcessResult r =
        test::run_process(tool, {"--config", QString::fromStdString(cfg_dir), "--type", "q4_0",
                                 "--output", out, "--threads", "2"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("dummy_gguf.types f32 x"), qPrintable(r.out));
    QVERIFY(r.out.contains("q4_0 x"));
    QVERIFY(r.out.contains("dummy_gguf.weight_bytes_per_token "));
    QVERIFY(fs::exists(out.toStdString()));

    struct Bad {
      QStringList args;
      const char* message;
    };
    for (const Bad& b :
         {Bad{{"--config", QString::fromStdString(cfg_dir), "--type", "q3_k", "--output", out},
              "--type must be"},
          Bad{{"--config", QString::fromStdString(cfg_dir), "--type", "q8_0"}, "are required"},
          Bad{{"--config", QString::fromStdString(cfg_dir), "--type", "q8_0", "--output", out,
               "--threads", "-1"},
              "--threads must be a whole number"},
          Bad{{"--bogus", "1"}, "unknown option --bogus"},
          Bad{{"--config"}, "--config needs a value"}}) {
      r = test::run_process(tool, b.args);
      QCOMPARE(r.exit_code, 2);
      QVERIFY2(r.err.contains(b.message), qPrintable(r.err));
    }
    // A config that is not there, and a vocabulary of another size: exit 1, the file named.
    r = test::run_process(tool, {"--config", dir_.filePath("none.json"), "--type", "q8_0",
                                 "--output", dir_.filePath("none.gguf")});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("none.json"), qPrintable(r.err));
    QVERIFY(!fs::exists(dir_.filePath("none.gguf").toStdString()));
    if (fs::exists(vocab_path())) {
      r = test::run_process(
          tool, {"--config", QString::fromStdString(cfg_dir), "--type", "q8_0", "--output",
                 dir_.filePath("v.gguf"), "--vocab", QString::fromStdString(vocab_path())});
      QCOMPARE(r.exit_code, 1);
      QVERIFY2(r.err.contains("128256 tokens"), qPrintable(r.err));
      QVERIFY(!fs::exists(dir_.filePath("v.gguf").toStdString()));
    }
  }
};

QTEST_GUILESS_MAIN(DummyGgufFileTest)
#include "dummy_gguf_file_test.moc"
