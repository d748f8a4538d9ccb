// The built-in calibration set's choice by the model's languages (calibration_language.h): the
// letter test on UTF-8 pieces; real vocabularies (SmolLM2's English-only one; Mistral's
// multilingual one) and constructed ones on both sides of the threshold; declared languages (a
// README's front matter) winning over the vocabulary; a missing English set; and a gptq job on an
// English-only fixture model reading calibration-en.txt and on the same model declared multilingual
// reading the full set.
#include <QtTest>

#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "engine/quant/calibration_language.h"
#include "engine/quant/quantize_model.h"
#include "engine/tokenizer/tokenizer_loader.h"
#include "quant_model_util.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

// `n` tokens of which `foreign` hold a CJK or Cyrillic letter, the rest ASCII (with a few
// English-text symbols and stray bytes that must not count).
std::vector<std::string> vocab(int n, int foreign) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) {
    if (i < foreign) {
      v.push_back(i % 2 == 0 ? "\xe4\xb8\xad\xe6\x96\x87" : "\xd0\x9f\xd1\x80\xd0\xb8");
    } else if (i % 50 == 0) {
      v.push_back(i % 100 == 0 ? "\xe2\x80\x99s" : "\xc3");  // ’s, a lone lead byte
    } else {
      v.push_back("tok" + std::to_string(i));
    }
  }
  return v;
}

}  // namespace

class CalibrationLanguageTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string text_dir_;

 private slots:
  void initTestCase() {
    text_dir_ = dir_.filePath("text").toStdString();
    fs::create_directories(text_dir_);
    std::string words;
    for (int i = 0; i < 4000; ++i) words += (i % 3 ? "river stone " : "light over the model. ");
    std::ofstream(text_dir_ + "/calibration.txt") << words << "\xe4\xb8\xad\xe6\x96\x87\n";
    std::ofstream(text_dir_ + "/calibration-en.txt") << words;
  }

  void letters() {
    QVERIFY(!has_non_english_letter("hello, world 42"));
    QVERIFY(has_non_english_letter("caf\xc3\xa9"));             // é
    QVERIFY(has_non_english_letter("\xe4\xb8\xad"));            // 中
    QVERIFY(has_non_english_letter("\xd0\x9f"));                // П
    QVERIFY(!has_non_english_letter("\xe2\x80\x99"));           // ’ (punctuation)
    QVERIFY(!has_non_english_letter("\xe2\x80\x94 \xc2\xa9"));  // — and © (below U+00C0)
    QVERIFY(!has_non_english_letter("\xe4\xb8"));               // a partial character
    QVERIFY(!has_non_english_letter("\xb8\xad"));               // continuation bytes alone
  }

  void real_vocabularies() {
    auto smol = load_hf_tokenizer(test::fixture_path("tokenizer/smollm2"));
    LATHE_QVERIFY_RESULT(smol);
    const VocabLanguageShare s = vocab_language_share(*smol.value());
    qInfo("SmolLM2: %lld of %lld tokens (%.2f%%)", static_cast<long long>(s.non_english),
          static_cast<long long>(s.tokens), 100 * s.share());
    QVERIFY(s.tokens > 49000);
    QVERIFY(s.share() < kEnglishOnlyMaxShare);
    QVERIFY(choose_default_calibration({}, s, text_dir_).english);
    auto mistral = load_hf_tokenizer(test::fixture_path("tokenizer/mistral"));
    LATHE_QVERIFY_RESULT(mistral);
    const VocabLanguageShare m = vocab_language_share(*mistral.value());
    qInfo("Mistral: %lld of %lld tokens (%.2f%%)", static_cast<long long>(m.non_english),
          static_cast<long long>(m.tokens), 100 * m.share());
    QVERIFY(m.tokens > 31000);
    QVERIFY(m.share() > 0.1);  // Mistral's SentencePiece vocabulary: 16.5%
    const CalibrationChoice c = choose_default_calibration({}, m, text_dir_);
    QVERIFY(!c.english);
    QCOMPARE(c.path, text_dir_ + "/calibration.txt");
  }

  void constructed_vocabularies() {
    const VocabLanguageShare en = vocab_language_share(vocab(10000, 100));  // 1%
    QCOMPARE(en.non_english, int64_t{100});
    const CalibrationChoice a = choose_default_calibration({}, en, text_dir_);
    QVERIFY(a.english);
    QCOMPARE(a.path, text_dir_ + "/calibration-en.txt");
    QVERIFY2(a.reason.find("English set") != std::string::npos &&
                 a.reason.find("1.0% of its vocabulary") != std::string::npos,
             a.reason.c_str());
    const VocabLanguageShare multi = vocab_language_share(vocab(10000, 2500));  // 25%
    const CalibrationChoice b = choose_default_calibration({}, multi, text_dir_);
    QVERIFY(!b.english);
    QCOMPARE(b.path, text_dir_ + "/calibration.txt");
    QVERIFY(b.reason.find("multilingual set") != std::string::npos);
  }

  void declared_languages_win() {
    const VocabLanguageShare multi = vocab_language_share(vocab(1000, 500));
    const VocabLanguageShare en = vocab_language_share(vocab(1000, 0));
    QVERIFY(choose_default_calibration({"en"}, multi, text_dir_).english);
    QVERIFY(choose_default_calibration({"en-us", "english"}, multi, text_dir_).english);
    QVERIFY(!choose_default_calibration({"en", "zh"}, en, text_dir_).english);
    QVERIFY(choose_default_calibration({"en", "zh"}, en, text_dir_).reason.find("en, zh") !=
            std::string::npos);
    // No English set on disk: the full one, and how to get the other.
    const std::string bare = dir_.filePath("bare").toStdString();
    fs::create_directories(bare);
    const CalibrationChoice c = choose_default_calibration({"en"}, en, bare);
    QVERIFY(!c.english);
    QVERIFY(c.reason.find("is missing; run scripts/fetch-eval-text.sh") != std::string::npos);
  }

  void the_job_picks_by_model() {
    qputenv("LATHE_TEXT_DIR", QByteArray::fromStdString(text_dir_));
    const std::string model = dir_.filePath("model").toStdString();
    LATHE_QVERIFY_OK(test::write_synthetic_model(model, {}));  // the tiny fixture's tokenizer
    auto prepare = [&]() {
      QuantizeRequest r;
      r.model = model;
      r.output = dir_.filePath("never").toStdString();
      r.scheme.scheme = "gptq";
      r.scheme.group_size = 64;
      r.calibration.num_samples = 8;
      r.calibration.seq_len = 32;
      return QuantizeJob::prepare(r);
    };
    {
      auto job = prepare();
      LATHE_QVERIFY_RESULT(job);
      QCOMPARE(job.value()->calibration().origin, text_dir_ + "/calibration-en.txt");
      QVERIFY(job.value()->calibration_choice().find("English set") != std::string::npos);
    }
    std::ofstream(model + "/README.md") << "---\nlicense: apache-2.0\nlanguage:\n- en\n- zh\n"
                                           "tags:\n- chat\n---\n# A model\n";
    {
      auto job = prepare();
      LATHE_QVERIFY_RESULT(job);
      QCOMPARE(job.value()->calibration().origin, text_dir_ + "/calibration.txt");
      QVERIFY2(
          job.value()->calibration_choice().find("declares languages en, zh") != std::string::npos,
          job.value()->calibration_choice().c_str());
    }
    std::ofstream(model + "/README.md", std::ios::trunc) << "---\nlanguage: [en]\n---\n";
    {
      auto job = prepare();
      LATHE_QVERIFY_RESULT(job);
      QCOMPARE(job.value()->calibration().origin, text_dir_ + "/calibration-en.txt");
    }
    qunsetenv("LATHE_TEXT_DIR");
  }
};

QTEST_GUILESS_MAIN(CalibrationLanguageTest)
#include "calibration_language_test.moc"
