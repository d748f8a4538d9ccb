// Tokenizers across formats (engine/quant/tokenizer_export.h), judged by what a user notices: the
// same text gives the same token ids before and after.
//   HF -> GGUF: the tokenizer fixtures (byte-level BPE of Llama 3, Qwen2, SmolLM2 style;
//   SentencePiece models of Mistral and a trained one) written as GGUF metadata, read back by the
//   engine's GGUF reader and tokenizer.
//   GGUF -> HF: llama.cpp's vocabulary files (Qwen2, Llama 3, Llama 2 SentencePiece; fetched by
//   scripts/fetch-test-assets.sh) written as tokenizer.json / tokenizer.model +
//   tokenizer_config.json and loaded by the engine's HF tokenizer loader; the texts are llama.cpp's
//   own test texts.
#include <QtTest>

#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model.h"
#include "engine/quant/atomic_output.h"
#include "engine/quant/tokenizer_export.h"
#include "test_support.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kTexts = {
    "Hello world",
    " Hello World!",
    "  leading spaces, 3 digits 12345 and\ttabs\n\nnew lines",
    "héllo Äpfel нещо на Български 🦙.cpp",
    "<|im_start|>user\nHi<|im_end|>",
    "<s>[INST] question [/INST]",
    "don't you'll WE'RE",
};

// llama.cpp's test texts of a vocabulary file ("__ggml_vocab_test__"-separated).
std::vector<std::string> llama_cpp_texts(const std::string& inp) {
  std::ifstream f(inp, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find(sep, start);
    out.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + sep.size();
  }
  return out;
}

}  // namespace

class TokenizerExportTest : public QObject {
  Q_OBJECT
 private slots:
  void hf_to_gguf_data() {
    QTest::addColumn<QString>("folder");
    for (const char* f : {"tiny_llama3", "tiny_qwen2", "smollm2", "mistral", "spm_trained"})
      QTest::newRow(f) << QString(f);
  }
  void hf_to_gguf() {
    QFETCH(QString, folder);
    QTemporaryDir dir;
    const std::string hf = dir.filePath("hf").toStdString();
    fs::copy(test::fixture_path("tokenizer/" + folder.toStdString()), hf);
    Result<std::shared_ptr<const Tokenizer>> want = load_hf_tokenizer(hf);
    LATHE_QVERIFY_RESULT(want);
    const int64_t vocab = (*want)->vocab_size() + 5;  // an embedding with a few extra rows
    Result<GgufMetadata> m = gguf_tokenizer_metadata_from_hf(hf, vocab);
    LATHE_QVERIFY_RESULT(m);
    gguf_set(*m, "general.architecture", gguf_string("llama"));
    const std::string path = dir.filePath("tok.gguf").toStdString();
    Result<GgufWriter> w = GgufWriter::create(path, *m, {});
    LATHE_QVERIFY_RESULT(w);
    LATHE_QVERIFY_OK(w->finish());
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(path);
    LATHE_QVERIFY_RESULT(g);
    Result<GgufTokenizerData> data = read_gguf_tokenizer_data(**g);
    LATHE_QVERIFY_RESULT(data);
    QCOMPARE(static_cast<int64_t>(data->tokens.size()), vocab);  // padded as llama.cpp pads
    QCOMPARE(data->tokens.back(), "[PAD" + std::to_string(vocab - 1) + "]");
    Result<std::shared_ptr<const Tokenizer>> got = load_gguf_tokenizer(*data);
    LATHE_QVERIFY_RESULT(got);
    for (const std::string& text : kTexts) {
      QCOMPARE((*got)->encode(text), (*want)->encode(text));
      EncodeOptions o;
      o.add_special_tokens = false;
      o.parse_special = false;
      QCOMPARE((*got)->encode(text, o), (*want)->encode(text, o));
    }
    QCOMPARE((*got)->bos_id(), (*want)->bos_id());
    QCOMPARE((*got)->eos_id(), (*want)->eos_id());
  }

  void gguf_to_hf_data() {
    QTest::addColumn<QString>("vocab");
    for (const char* v : {"qwen2", "llama-bpe", "llama-spm"}) QTest::newRow(v) << QString(v);
  }
  void gguf_to_hf() {
    QFETCH(QString, vocab);
    const std::string base =
        test::test_assets_dir() + "/llama.cpp-vocab/ggml-vocab-" + vocab.toStdString() + ".gguf";
    if (!fs::exists(base))
      QSKIP("llama.cpp's vocabularies are not fetched (scripts/fetch-test-assets.sh)");
    Result<std::shared_ptr<const GgufFile>> g = GgufFile::open(base);
    LATHE_QVERIFY_RESULT(g);
    Result<GgufTokenizerData> data = read_gguf_tokenizer_data(**g);
    LATHE_QVERIFY_RESULT(data);
    Result<std::shared_ptr<const Tokenizer>> want = load_gguf_tokenizer(*data);
    LATHE_QVERIFY_RESULT(want);
    auto files = hf_tokenizer_files_from_gguf(*data, "{{ messages }}", 4096);
    LATHE_QVERIFY_RESULT(files);
    QTemporaryDir dir;
    for (const auto& [name, contents] : *files)
      LATHE_QVERIFY_OK(
          write_small_file(dir.filePath(QString::fromStdString(name)).toStdString(), contents));
    QVERIFY(fs::exists(
        dir.filePath(vocab == "llama-spm" ? "tokenizer.model" : "tokenizer.json").toStdString()));
    Result<std::shared_ptr<const Tokenizer>> got = load_hf_tokenizer(dir.path().toStdString());
    LATHE_QVERIFY_RESULT(got);
    std::vector<std::string> texts = llama_cpp_texts(base + ".inp");
    texts.insert(texts.end(), kTexts.begin(), kTexts.end());
    QVERIFY(texts.size() > 20);
    for (const std::string& text : texts)
      QVERIFY2((*got)->encode(text) == (*want)->encode(text),
               qPrintable(
                   QString::fromStdString(text + ": " + test::ids_to_string((*got)->encode(text)) +
                                          " vs " + test::ids_to_string((*want)->encode(text)))));
    QCOMPARE((*got)->bos_id(), (*want)->bos_id());
    QCOMPARE((*got)->eos_id(), (*want)->eos_id());
  }

  void folders_without_a_usable_tokenizer_are_refused() {
    // GPT-2 with add_prefix_space: llama.cpp's BPE vocabularies have no such switch.
    const Status s =
        gguf_tokenizer_metadata_from_hf(test::fixture_path("tokenizer/tiny_gpt2"), 1000).status();
    QCOMPARE(s.code(), ErrorCode::kUnsupported);
    QVERIFY2(s.message().find("no llama.cpp name") != std::string::npos, s.message().c_str());
    QTemporaryDir dir;
    QCOMPARE(gguf_tokenizer_metadata_from_hf(dir.path().toStdString(), 10).status().code(),
             ErrorCode::kNotFound);
    GgufTokenizerData d;
    d.model = "t5";
    d.tokens = {"a"};
    QCOMPARE(hf_tokenizer_files_from_gguf(d, "", 10).status().code(), ErrorCode::kUnsupported);
  }
};

QTEST_GUILESS_MAIN(TokenizerExportTest)
#include "tokenizer_export_test.moc"
