// Lathe's tokenizers against reference tokenizers nobody here wrote (fixtures made by
// scripts/fixtures/make_tokenizer_fixtures.py): Hugging Face transformers/tokenizers for byte-level
// BPE (SmolLM2, Qwen2, Llama 3 and small tokenizer.json files exercising each feature),
// sentencepiece for SentencePiece models (one trained by spm_train, Mistral 7B's, Llama 2's), and
// llama.cpp's own test cases for the real vocabularies. Every reference text also round-trips
// through decode() and through the streaming detokenizer.
//
// The Qwen2, Llama 3 and Llama 2 vocabularies are fetched by scripts/fetch-test-assets.sh; the
// SmolLM2 one is the default model (scripts/fetch-default-model.sh). Tests skip when they are
// absent.
#include <QtTest>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/spm_model_proto.h"
#include "engine/tokenizer/tokenizer_loader.h"
#include "engine/tokenizer/unicode.h"
#include "tokenizer_fixtures.h"

using namespace lathe;
using test::ReferenceVocab;

namespace {

std::string describe(const std::string& vocab, size_t index, const std::string& text,
                     const char* what, const std::vector<TokenId>& got,
                     const std::vector<TokenId>& want) {
  return vocab + " case " + std::to_string(index) + " " + what + ": text \"" + text +
         "\"\n   got " + test::ids_to_string(got) + "\n  want " + test::ids_to_string(want);
}

// Every check one reference vocabulary gets. Returns an empty string or the first failure.
std::string check_reference(const Tokenizer& t, const std::shared_ptr<const Tokenizer>& shared,
                            const std::string& name) {
  const ReferenceVocab ref = test::reference_vocab(name);
  if (ref.cases.size() < 15) return name + ": reference_ids.json has no cases for this vocabulary";
  if (t.add_bos() != ref.add_bos) return name + ": add_bos differs from the model's config";
  if (t.add_eos() != ref.add_eos) return name + ": add_eos differs from the model's config";
  if (ref.add_bos && t.bos_id() != ref.bos) return name + ": BOS id " + std::to_string(t.bos_id());
  if (ref.eos >= 0 && t.eos_id() != ref.eos) return name + ": EOS id " + std::to_string(t.eos_id());
  for (size_t i = 0; i < ref.cases.size(); ++i) {
    const test::ReferenceCase& c = ref.cases[i];
    const std::vector<TokenId> ids = t.encode(c.text, {false, true});
    if (ids != c.ids) return describe(name, i, c.text, "ids", ids, c.ids);
    const std::vector<TokenId> raw = t.encode(c.text, {false, false});
    if (raw != c.ids_no_special)
      return describe(name, i, c.text, "ids without parse_special", raw, c.ids_no_special);
    std::vector<TokenId> full = c.ids;
    if (ref.add_bos) full.insert(full.begin(), ref.bos);
    if (ref.add_eos) full.push_back(ref.eos);
    const std::vector<TokenId> with_special = t.encode(c.text);
    if (with_special != full)
      return describe(name, i, c.text, "ids with BOS/EOS", with_special, full);

    const std::string expected_text = !ref.round_trip ? c.decoded
                                      : ref.nfc       ? unicode::nfc(c.text)
                                                      : c.text;
    for (const auto* seq : {&ids, &raw}) {
      if (!ref.round_trip && seq == &raw) continue;  // the reference decoded `ids` only
      const std::string back = t.decode(*seq);
      if (back != expected_text) {
        return name + " case " + std::to_string(i) + ": decode(encode(x)) != expected\n   got \"" +
               back + "\"\n  want \"" + expected_text + "\"";
      }
    }
    for (const bool skip : {false, true}) {
      IncrementalDetokenizer d(shared, skip);
      std::string streamed;
      for (const TokenId id : full) streamed += d.push(id);
      streamed += d.finish();
      if (streamed != t.decode(full, skip)) {
        return name + " case " + std::to_string(i) +
               ": streamed text differs from decode (skip_special " + (skip ? "on" : "off") + ")";
      }
    }
  }
  return {};
}

// llama.cpp's vocabulary test cases: texts separated by "\n__ggml_vocab_test__\n", one line of
// ids (no BOS/EOS) per text, produced by the model's own Hugging Face tokenizer.
std::string check_llama_cpp_cases(const Tokenizer& t, const std::string& gguf_path) {
  std::ifstream inp(gguf_path + ".inp", std::ios::binary),
      out(gguf_path + ".out", std::ios::binary);
  if (!inp || !out) return gguf_path + ".inp/.out are missing";
  std::stringstream raw;
  raw << inp.rdbuf();
  const std::string all = raw.str(), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < all.size();) {
    const size_t next = all.find(sep, pos);
    texts.push_back(all.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  size_t checked = 0;
  for (std::string line; std::getline(out, line) && checked < texts.size(); ++checked) {
    std::vector<TokenId> want;
    std::istringstream ls(line);
    for (TokenId id; ls >> id;) want.push_back(id);
    const std::vector<TokenId> got = t.encode(texts[checked], {false, true});
    if (got != want)
      return describe(gguf_path, checked, texts[checked], "llama.cpp case", got, want);
  }
  if (checked != texts.size() || checked < 40)
    return gguf_path + ": only " + std::to_string(checked) + " cases read";
  return {};
}

Result<std::shared_ptr<const Tokenizer>> gguf_tokenizer(const std::string& path) {
  LATHE_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  LATHE_ASSIGN_OR_RETURN(GgufTokenizerData data, read_gguf_tokenizer_data(*file));
  return load_gguf_tokenizer(data);
}

std::string asset(const std::string& name) {
  return test::test_assets_dir() + "/llama.cpp-vocab/" + name;
}

#define SKIP_WITHOUT(path, how) \
  if (!std::filesystem::exists(path)) QSKIP(("missing " + (path) + "; run " how).c_str())

}  // namespace

class TokenizerReferenceTest : public QObject {
  Q_OBJECT
 private slots:
  void smollm2_gguf_matches_transformers() {
    const std::string path = test::default_model_path();
    SKIP_WITHOUT(path, "scripts/fetch-default-model.sh");
    auto t = gguf_tokenizer(path);
    LATHE_QVERIFY_RESULT(t);
    QCOMPARE((*t)->kind(), std::string("bpe"));
    QCOMPARE((*t)->vocab_size(), int64_t{49152});
    const std::string failure = check_reference(**t, *t, "smollm2");
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void smollm2_tokenizer_json_matches_transformers() {
    auto t = load_hf_tokenizer(test::fixture_path("tokenizer/smollm2"));
    LATHE_QVERIFY_RESULT(t);
    QCOMPARE((*t)->eos_id(), 2);  // tokenizer_config.json: eos_token <|im_end|>
    const std::string failure = check_reference(**t, *t, "smollm2");
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void qwen2_gguf_matches_transformers_and_llama_cpp() {
    const std::string path = asset("ggml-vocab-qwen2.gguf");
    SKIP_WITHOUT(path, "scripts/fetch-test-assets.sh");
    auto t = gguf_tokenizer(path);
    LATHE_QVERIFY_RESULT(t);
    std::string failure = check_reference(**t, *t, "qwen2");
    QVERIFY2(failure.empty(), failure.c_str());
    failure = check_llama_cpp_cases(**t, path);
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void llama3_gguf_matches_transformers_and_llama_cpp() {
    const std::string path = asset("ggml-vocab-llama-bpe.gguf");
    SKIP_WITHOUT(path, "scripts/fetch-test-assets.sh");
    auto t = gguf_tokenizer(path);
    LATHE_QVERIFY_RESULT(t);
    QCOMPARE((*t)->encode("Hi").front(), 128000);  // <|begin_of_text|>
    std::string failure = check_reference(**t, *t, "llama3");
    QVERIFY2(failure.empty(), failure.c_str());
    failure = check_llama_cpp_cases(**t, path);
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void llama2_gguf_matches_sentencepiece_and_llama_cpp() {
    const std::string path = asset("ggml-vocab-llama-spm.gguf");
    SKIP_WITHOUT(path, "scripts/fetch-test-assets.sh");
    auto t = gguf_tokenizer(path);
    LATHE_QVERIFY_RESULT(t);
    QCOMPARE((*t)->kind(), std::string("spm"));
    std::string failure = check_reference(**t, *t, "llama2");
    QVERIFY2(failure.empty(), failure.c_str());
    failure = check_llama_cpp_cases(**t, path);
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void trained_spm_model_matches_sentencepiece() {
    auto t = load_hf_tokenizer(test::fixture_path("tokenizer/spm_trained"));
    LATHE_QVERIFY_RESULT(t);
    QCOMPARE((*t)->kind(), std::string("spm"));
    const std::string failure = check_reference(**t, *t, "spm_trained");
    QVERIFY2(failure.empty(), failure.c_str());
    // byte_fallback: characters the model never saw come out as <0xNN> pieces, and back.
    const std::string unseen = "\xF0\x9D\x84\x9E\xE2\x99\xAB";  // 𝄞♫: not in its training text
    const std::vector<TokenId> ids = (*t)->encode(unseen, {false, true});
    QCOMPARE((*t)->decode(ids), unseen);
    QCOMPARE(ids.size(), size_t{8});  // "▁" + 7 byte pieces
    QVERIFY((*t)->token_bytes(ids[1]).size() == 1);
  }

  void mistral_model_matches_sentencepiece() {
    auto t = load_hf_tokenizer(test::fixture_path("tokenizer/mistral"));
    LATHE_QVERIFY_RESULT(t);
    const std::string failure = check_reference(**t, *t, "mistral");
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void mistral_as_a_gguf_vocabulary_matches_sentencepiece() {
    // The GGUF path rebuilds a model proto from tokens/scores/types, as llama.cpp's converter
    // stores them; it must tokenize exactly as the original tokenizer.model.
    std::ifstream in(test::fixture_path("tokenizer/mistral/tokenizer.model"), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    auto spec = parse_spm_model(bytes.str());
    LATHE_QVERIFY_RESULT(spec);
    GgufTokenizerData d;
    d.model = "llama";
    d.pre = "default";
    for (size_t i = 0; i < spec->pieces.size(); ++i) {
      d.tokens.push_back(spec->pieces[i].piece);
      d.scores.push_back(spec->pieces[i].score);
      d.token_types.push_back(static_cast<int32_t>(spec->pieces[i].type));
    }
    d.unk_id = 0;
    d.bos_id = 1;
    d.eos_id = 2;
    auto t = load_gguf_tokenizer(d);
    LATHE_QVERIFY_RESULT(t);
    const std::string failure = check_reference(**t, *t, "mistral");
    QVERIFY2(failure.empty(), failure.c_str());
  }

  void tokenizer_json_features_match_hf_tokenizers() {
    // tiny_llama3: Llama 3 split, ignore_merges, TemplateProcessing BOS, "a b" merges,
    // lstrip/rstrip and single_word added tokens. tiny_qwen2: NFC, Qwen2 split, ["a", "b"] merges,
    // an added token matched after normalization. tiny_gpt2: ByteLevel(add_prefix_space,
    // use_regex).
    for (const char* name : {"tiny_llama3", "tiny_qwen2", "tiny_gpt2"}) {
      auto t = load_hf_tokenizer(test::fixture_path(std::string("tokenizer/") + name));
      LATHE_QVERIFY_RESULT(t);
      const std::string failure = check_reference(**t, *t, name);
      QVERIFY2(failure.empty(), failure.c_str());
    }
  }

  void encode_throughput_report() {
    // Not a timed test: reports encoding speed (see the tokenizer report). Natural text repeats
    // words, so the piece cache serves most of it; random words measure the merge loop itself.
    auto t = load_hf_tokenizer(test::fixture_path("tokenizer/smollm2"));
    LATHE_QVERIFY_RESULT(t);
    std::string natural;
    const ReferenceVocab ref = test::reference_vocab("smollm2");
    for (int rep = 0; natural.size() < (1u << 20); ++rep) {
      for (const auto& c : ref.cases) natural += c.text + " " + std::to_string(rep) + "\n";
    }
    std::string random_words;
    uint32_t state = 12345;
    while (random_words.size() < (1u << 20)) {
      state = state * 1664525u + 1013904223u;
      const int len = 3 + static_cast<int>((state >> 24) % 8);
      for (int k = 0; k < len; ++k) {
        state = state * 1664525u + 1013904223u;
        random_words.push_back(static_cast<char>('a' + (state >> 24) % 26));
      }
      random_words += (state & 0x100) ? ", " : " ";
    }
    for (const auto* text : {&natural, &random_words}) {
      const auto start = std::chrono::steady_clock::now();
      const std::vector<TokenId> ids = (*t)->encode(*text, {false, false});
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      qInfo("encode %s: %zu bytes -> %zu tokens in %.3f s (%.0f tokens/s, %.1f MB/s)",
            text == &natural ? "repetitive text" : "random words", text->size(), ids.size(),
            seconds, ids.size() / seconds, text->size() / seconds / 1e6);
      QCOMPARE((*t)->decode(ids), *text);
    }
  }
};

QTEST_GUILESS_MAIN(TokenizerReferenceTest)
#include "tokenizer_reference_test.moc"
