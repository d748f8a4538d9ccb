// Tokenizer building blocks: Unicode classes and UTF-8 repair, the byte alphabet, pre-tokenizer
// splits against Hugging Face tokenizers' own splits, added-token flags, the streaming
// detokenizer, and every kind of bad input the loaders reject.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/spm_model_proto.h"
#include "engine/tokenizer/tokenizer_loader.h"
#include "engine/tokenizer/unicode.h"
#include "tokenizer_fixtures.h"

using namespace lathe;

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

// A byte-level BPE whose vocabulary is the 256 bytes, "ab", "abc" and a special token <|end|>.
std::shared_ptr<const Tokenizer> byte_tokenizer() {
  BpeTokenizerConfig c;
  for (int b = 0; b < 256; ++b)
    c.vocab.push_back(byte_level::encode(std::string(1, static_cast<char>(b))));
  c.vocab.push_back("ab");
  c.vocab.push_back("abc");
  c.merges = {{"a", "b"}, {"ab", "c"}};
  AddedToken end;
  end.content = "<|end|>";
  end.id = 258;
  end.special = true;
  c.added_tokens = {end};
  c.eos_id = 258;
  auto t = BpeTokenizer::create(std::move(c));
  return t ? std::shared_ptr<const Tokenizer>(*t) : nullptr;
}

std::string stream(const std::shared_ptr<const Tokenizer>& t, const std::vector<TokenId>& ids,
                   bool skip, std::vector<std::string>* deltas = nullptr) {
  IncrementalDetokenizer d(t, skip);
  std::string out;
  for (const TokenId id : ids) {
    const std::string delta = d.push(id);
    if (deltas != nullptr) deltas->push_back(delta);
    out += delta;
  }
  return out + d.finish();
}

void write_file(const QString& path, const std::string& content) {
  std::ofstream f(path.toStdString(), std::ios::binary);
  f << content;
}

// A minimal tokenizer.json: vocab {a, b, ab}, the given merges, pre-tokenizer and normalizer.
std::string tokenizer_json(const std::string& merges, const std::string& pre_tokenizer,
                           const std::string& top_extra = "",
                           const std::string& normalizer = "null") {
  return R"({"version":"1.0",)" + top_extra + R"("normalizer":)" + normalizer +
         R"(,"pre_tokenizer":)" + pre_tokenizer +
         R"(,"post_processor":null,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":)" +
         merges + "}}";
}
const std::string kByteLevelPre =
    R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})";

GgufTokenizerData bpe_gguf() {
  GgufTokenizerData d;
  d.model = "gpt2";
  d.pre = "default";
  d.tokens = {"a", "b", "ab", "<|end|>"};
  d.token_types = {1, 1, 1, 3};
  d.merges = {"a b"};
  d.eos_id = 3;
  return d;
}

GgufTokenizerData spm_gguf() {
  GgufTokenizerData d;
  d.model = "llama";
  d.tokens = {"<unk>",
              "<s>",
              "</s>",
              "\xE2\x96\x81",
              "a",
              "b",
              "\xE2\x96\x81"
              "a"};
  d.scores = {0, 0, 0, -1, -2, -3, -0.5f};
  d.token_types = {2, 3, 3, 1, 1, 1, 1};
  d.bos_id = 1;
  d.eos_id = 2;
  d.unk_id = 0;
  return d;
}

}  // namespace

class TokenizerUnitsTest : public QObject {
  Q_OBJECT
 private slots:
  void character_classes_follow_unicode() {
    using namespace lathe::unicode;
    QCOMPARE(char_class('a'), kClassLetter);
    QCOMPARE(char_class(0xD55C), kClassLetter);  // 한
    QCOMPARE(char_class(0x4E2D), kClassLetter);  // 中
    QCOMPARE(char_class(0x0663), kClassNumber);  // Arabic-Indic 3
    QCOMPARE(char_class(0x00BD), kClassNumber);  // ½ (No)
    QCOMPARE(char_class(0x2167), kClassNumber);  // Ⅷ (Nl)
    QCOMPARE(char_class(0x00A0), kClassSpace);
    QCOMPARE(char_class(0x3000), kClassSpace);
    QCOMPARE(char_class(0x0085), kClassSpace);
    QCOMPARE(char_class(0x200B), kClassOther);   // zero width space is not White_Space
    QCOMPARE(char_class(0x001C), kClassOther);   // Python's str.isspace() says yes; regexes say no
    QCOMPARE(char_class(0x0301), kClassOther);   // combining mark
    QCOMPARE(char_class(0x1F999), kClassOther);  // emoji
    QCOMPARE(char_class(kInvalidCodepoint), kClassOther);
    QVERIFY(is_word_char('x') && is_word_char('7') && is_word_char('_') && is_word_char(0x0301));
    QVERIFY(!is_word_char('-') && !is_word_char(' ') && !is_word_char(','));
  }

  void utf8_decoding_never_fails() {
    size_t len = 0;
    QCOMPARE(unicode::decode_utf8("\xF0\x9F\xA6\x99", 0, &len), 0x1F999u);
    QCOMPARE(len, size_t{4});
    QCOMPARE(unicode::decode_utf8("\xC0\xAF", 0, &len), unicode::kInvalidCodepoint);  // overlong
    QCOMPARE(len, size_t{1});
    QCOMPARE(unicode::decode_utf8("\xED\xA0\x80", 0, &len),
             unicode::kInvalidCodepoint);                                             // surrogate
    QCOMPARE(unicode::decode_utf8("\xE4\xB8", 0, &len), unicode::kInvalidCodepoint);  // truncated
  }

  void nfc_composes_and_keeps_invalid_bytes() {
    QCOMPARE(unicode::nfc("cafe\xCC\x81"), std::string("caf\xC3\xA9"));
    QCOMPARE(unicode::nfc("\xEA\xB0\x80"), std::string("\xEA\xB0\x80"));  // 가 already NFC
    QCOMPARE(unicode::nfc("\xE1\x84\x80\xE1\x85\xA1"), std::string("\xEA\xB0\x80"));  // ᄀ+ᅡ -> 가
    QCOMPARE(unicode::nfc("e\xCC\x81\xFF"
                          "e\xCC\x81"),
             std::string("\xC3\xA9\xFF\xC3\xA9"));
  }

  void invalid_utf8_becomes_one_replacement_per_maximal_subpart() {
    QCOMPARE(unicode::sanitize_utf8("a\xFF"
                                    "b"),
             "a" + kReplacement + "b");
    QCOMPARE(unicode::sanitize_utf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
    QCOMPARE(unicode::sanitize_utf8("\xF0\x9F\x98"), kReplacement);         // truncated at the end
    QCOMPARE(unicode::sanitize_utf8("\xF0\x9F\x98x"), kReplacement + "x");  // cut short
    QCOMPARE(unicode::sanitize_utf8("\xC3\xA9\xE2\x82\xAC"), std::string("\xC3\xA9\xE2\x82\xAC"));
    std::string out;
    QCOMPARE(unicode::append_sanitized_utf8("ok\xF0\x9F\x98", out, false), size_t{2});  // holds 3
    QCOMPARE(out, std::string("ok"));
  }

  void byte_alphabet_round_trips_every_byte() {
    QCOMPARE(byte_level::encode(" "), std::string("\xC4\xA0"));   // Ġ
    QCOMPARE(byte_level::encode("\n"), std::string("\xC4\x8A"));  // Ċ
    QCOMPARE(byte_level::encode("a!~"), std::string("a!~"));
    std::string all;
    for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
    QCOMPARE(byte_level::decode(byte_level::encode(all)), all);
    QCOMPARE(byte_level::decode("<|im_end|>"), std::string("<|im_end|>"));
  }

  void pretokenizer_splits_equal_hugging_face() {
    const QJsonDocument doc = test::read_json_fixture("tokenizer/pretokenizer_splits.json");
    const QJsonArray texts = doc.object().value("texts").toArray();
    QVERIFY2(texts.size() > 30, "tokenizer/pretokenizer_splits.json is missing or empty");
    const std::pair<const char*, SplitRule> rules[] = {
        {"gpt2", SplitRule::kGpt2}, {"llama3", SplitRule::kLlama3}, {"qwen2", SplitRule::kQwen2}};
    for (int i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].toString().toStdString();
      for (const auto& [name, rule] : rules) {
        std::vector<std::string> want, got;
        for (const auto& p : doc.object().value(name).toArray()[i].toArray())
          want.push_back(p.toString().toStdString());
        for (auto p : split_with_rule(text, rule)) got.emplace_back(p);
        std::string detail;
        for (const auto& g : got) detail += "[" + g + "]";
        detail += " vs ";
        for (const auto& w : want) detail += "[" + w + "]";
        QVERIFY2(got == want,
                 (std::string(name) + " split differs on text " + std::to_string(i) + ": " + detail)
                     .c_str());
      }
      std::vector<std::string> want;
      for (const auto& p : doc.object().value("smollm2").toArray()[i].toArray())
        want.push_back(p.toString().toStdString());
      std::vector<std::string_view> pieces;
      std::deque<std::string> storage;
      PreTokenizer::smollm2().split(text, pieces, storage);
      QVERIFY2(std::vector<std::string>(pieces.begin(), pieces.end()) == want,
               ("smollm2 split differs on text " + std::to_string(i)).c_str());
    }
  }

  void split_patterns_are_recognised_exactly() {
    QCOMPARE(
        *split_rule_from_pattern(
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
        SplitRule::kLlama3);
    QCOMPARE(
        *split_rule_from_pattern(
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
        SplitRule::kQwen2);
    QVERIFY(!split_rule_from_pattern(R"(\p{N}{1,4}| ?\p{L}+)").has_value());
  }

  void byte_level_add_prefix_space_prefixes_each_piece() {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = true;
    std::vector<std::string_view> pieces;
    std::deque<std::string> storage;
    PreTokenizer({step}).split("hello world", pieces, storage);
    QCOMPARE(pieces.size(), size_t{2});
    QCOMPARE(std::string(pieces[0]), std::string(" hello"));
    QCOMPARE(std::string(pieces[1]), std::string(" world"));
  }

  void added_tokens_follow_their_flags() {
    auto token = [](std::string content, TokenId id, bool special) {
      AddedToken t;
      t.content = std::move(content);
      t.id = id;
      t.special = special;
      return t;
    };
    AddedToken mask = token("[MASK]", 1, true);
    mask.lstrip = mask.rstrip = true;
    AddedToken word = token("<w>", 2, false);
    word.single_word = true;
    const AddedTokenMatcher m({token("<|a|>", 0, true), mask, word, token("<|a|>x", 3, true)});
    std::vector<TextSegment> s;
    m.split("x <|a|>x<|a|>y  [MASK]  z a<w> <w>.", true, s);
    std::vector<std::pair<std::string, TokenId>> got;
    for (const auto& seg : s) got.emplace_back(std::string(seg.text), seg.token_id);
    const std::vector<std::pair<std::string, TokenId>> want = {
        {"x ", -1},        {"<|a|>x", 3},   {"<|a|>", 0}, {"y", -1},
        {"  [MASK]  ", 1}, {"z a<w> ", -1}, {"<w>", 2},   {".", -1}};
    QCOMPARE(got, want);
    s.clear();
    m.split("<|a|> <w> [MASK]", false,
            s);  // special tokens stay text; the plain added one does not
    QCOMPARE(s.size(), size_t{3});
    QCOMPARE(s[1].token_id, 2);
    QCOMPARE(std::string(s[0].text), std::string("<|a|> "));
  }

  void detokenizer_holds_incomplete_characters_back() {
    const auto t = byte_tokenizer();
    QVERIFY(t != nullptr);
    // 🦙 = F0 9F A6 99, one byte per token.
    std::vector<std::string> deltas;
    const std::string text = stream(t, {0xF0, 0x9F, 0xA6, 0x99, 'a', 'b'}, false, &deltas);
    QCOMPARE(deltas, (std::vector<std::string>{"", "", "", "\xF0\x9F\xA6\x99", "a", "b"}));
    QCOMPARE(text, std::string("\xF0\x9F\xA6\x99"
                               "ab"));
  }

  void detokenizer_never_stalls_on_invalid_bytes() {
    const auto t = byte_tokenizer();
    IncrementalDetokenizer d(t, false);
    QCOMPARE(d.push(0xF0), std::string());
    QCOMPARE(d.push('x'), kReplacement + "x");  // F0 cannot complete any more: replaced at once
    QCOMPARE(d.push(0xFF), kReplacement);       // never valid
    QCOMPARE(d.push(0xE2), std::string());
    QCOMPARE(d.push(0x82), std::string());
    QCOMPARE(d.pending_bytes(), size_t{2});
    QCOMPARE(d.finish(), kReplacement);  // the sequence ended incomplete
    QCOMPARE(d.pending_bytes(), size_t{0});
  }

  void detokenizer_concatenation_equals_decode() {
    const auto t = byte_tokenizer();
    const std::vector<TokenId> ids = {'a', 0xC3, 258, 0xA9, 'b', 0xE2, 0x82, 0xAC, 257, 0xF0, 0x9F};
    for (const bool skip : {false, true}) {
      QCOMPARE(stream(t, ids, skip), t->decode(ids, skip));
    }
    // Skipping <|end|> joins C3 A9 into "é"; the truncated F0 9F at the end is one U+FFFD.
    QCOMPARE(t->decode(ids, false), "a" + kReplacement + "<|end|>" + kReplacement +
                                        "b\xE2\x82\xAC"
                                        "abc" +
                                        kReplacement);
    QCOMPARE(t->decode(ids, true), std::string("a\xC3\xA9"
                                               "b\xE2\x82\xAC"
                                               "abc") +
                                       kReplacement);
    QCOMPARE(t->decode({258}, false), std::string("<|end|>"));
    QCOMPARE(t->decode({258}, true), std::string());
  }

  void detokenizer_applies_the_spm_leading_space_rule() {
    auto r = load_hf_tokenizer(test::fixture_path("tokenizer/spm_trained"));
    LATHE_QVERIFY_RESULT(r);
    const auto t = *r;
    QVERIFY(t->strips_dummy_prefix());
    const std::vector<TokenId> ids = t->encode("Hello world</s>again");
    QCOMPARE(t->decode(ids), std::string("<s>Hello world</s>again"));
    QCOMPARE(t->decode(ids, true), std::string("Hello worldagain"));
    for (const bool skip : {false, true}) QCOMPARE(stream(t, ids, skip), t->decode(ids, skip));
    // Generated text starts a sequence: its first space goes.
    QCOMPARE(stream(t, t->encode("Hi there", {false, true}), false), std::string("Hi there"));
  }

  void out_of_range_ids_are_ignored_and_reported() {
    const auto t = byte_tokenizer();
    QCOMPARE(t->decode({'a', -5, 99999, 'b'}), std::string("ab"));
    QCOMPARE(t->token_bytes(99999), std::string());
    QCOMPARE(stream(t, {'a', 99999, -1, 'b'}, false), std::string("ab"));
    const Status s = t->check_ids({'a', 99999});
    QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
    QVERIFY2(s.message().find("99999") != std::string::npos, s.message().c_str());
    LATHE_QVERIFY_OK(t->check_ids({0, 258}));
  }

  void invalid_utf8_text_encodes_without_loss() {
    const auto t = byte_tokenizer();
    const std::string text = "ab\xFF\xC3(abc\xF0\x9F";
    const std::vector<TokenId> ids = t->encode(text);
    std::string bytes;
    for (const TokenId id : ids) bytes += t->token_bytes(id);
    QCOMPARE(bytes, text);  // byte-level BPE keeps every byte
    QCOMPARE(t->decode(ids), "ab" + kReplacement + kReplacement + "(abc" + kReplacement);

    auto spm = load_hf_tokenizer(test::fixture_path("tokenizer/spm_trained"));
    LATHE_QVERIFY_RESULT(spm);
    QCOMPARE((*spm)->encode("a\xFF"
                            "b"),
             (*spm)->encode("a\xEF\xBF\xBD"
                            "b"));  // as sentencepiece does
  }

  void bpe_merges_lowest_rank_first_and_caches() {
    const auto t = byte_tokenizer();
    QCOMPARE(t->encode("abc abc"), (std::vector<TokenId>{257, ' ', 257}));
    QCOMPARE(t->encode("abab"), (std::vector<TokenId>{256, 256}));
    QCOMPARE(t->encode("x<|end|>y"), (std::vector<TokenId>{'x', 258, 'y'}));
    QCOMPARE(t->encode("x<|end|>y", {true, false}).size(), size_t{9});
    QCOMPARE(t->token_to_id("<|end|>"), 258);
    QCOMPARE(t->token_to_id("ab"), 256);
    QCOMPARE(t->token_to_id(" "), 32);  // plain text is looked up through the byte alphabet too
    QCOMPARE(t->token_to_id("nope"), -1);
  }

  // ---- bad input -------------------------------------------------------------------------

  void missing_folder_and_files_are_named() {
    auto r = load_hf_tokenizer("/nonexistent/lathe-model");
    QVERIFY(!r);
    QCOMPARE(r.status().code(), ErrorCode::kNotFound);
    QTemporaryDir dir;
    r = load_hf_tokenizer(dir.path().toStdString());
    QVERIFY(!r);
    QCOMPARE(r.status().message(),
             dir.path().toStdString() + ": no tokenizer.json or tokenizer.model");
  }

  void malformed_tokenizer_json_is_rejected() {
    struct Case {
      std::string json;
      ErrorCode code;
      std::string needle;
    };
    const std::vector<Case> cases = {
        {"{\"model\": ", ErrorCode::kCorruptFile, "not valid JSON"},
        {"[1, 2]", ErrorCode::kCorruptFile, "no \"model\""},
        {R"({"pre_tokenizer":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0}}})",
         ErrorCode::kCorruptFile, "no \"merges\""},
        {tokenizer_json(R"(["a c"])", kByteLevelPre), ErrorCode::kCorruptFile,
         "'c', which is not in the vocabulary"},
        {tokenizer_json(R"(["b b"])", kByteLevelPre), ErrorCode::kCorruptFile,
         "'bb', which is not"},
        {tokenizer_json(R"(["ab"])", kByteLevelPre), ErrorCode::kCorruptFile, "not two tokens"},
        {tokenizer_json(R"([["a"]])", kByteLevelPre), ErrorCode::kCorruptFile, "neither"},
        {tokenizer_json(
             R"(["a b"])",
             R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]})"),
         ErrorCode::kUnsupported, "Split pattern"},
        {tokenizer_json(
             R"(["a b"])",
             R"({"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"ByteLevel"}]})"),
         ErrorCode::kUnsupported, "'Whitespace'"},
        {tokenizer_json(R"(["a b"])", kByteLevelPre, R"("added_tokens":[{"content":"<x>"}],)"),
         ErrorCode::kCorruptFile, "integer id"},
        {tokenizer_json(R"(["a b"])", kByteLevelPre, "", R"({"type":"Lowercase"})"),
         ErrorCode::kUnsupported, "normalizer 'Lowercase'"},
        {R"({"model":{"type":"Unigram","vocab":[["a",0.0]]}})", ErrorCode::kUnsupported, "Unigram"},
    };
    for (const Case& c : cases) {
      QTemporaryDir dir;
      write_file(dir.filePath("tokenizer.json"), c.json);
      auto r = load_hf_tokenizer(dir.path().toStdString());
      QVERIFY2(!r, c.json.c_str());
      QVERIFY2(r.status().code() == c.code, (r.status().message() + " <- " + c.json).c_str());
      QVERIFY2(r.status().message().find(c.needle) != std::string::npos,
               r.status().message().c_str());
      QVERIFY2(r.status().message().find("tokenizer.json") != std::string::npos,
               r.status().message().c_str());
    }
  }

  void a_valid_minimal_tokenizer_json_loads() {
    QTemporaryDir dir;
    write_file(dir.filePath("tokenizer.json"), tokenizer_json(R"(["a b"])", kByteLevelPre));
    write_file(dir.filePath("tokenizer_config.json"),
               R"({"add_bos_token": false, "eos_token": "b"})");
    auto r = load_hf_tokenizer(dir.path().toStdString());
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE((*r)->encode("abba"), (std::vector<TokenId>{2, 1, 0}));
    QCOMPARE((*r)->eos_id(), 1);
    QCOMPARE((*r)->kind(), std::string("bpe"));
  }

  void malformed_tokenizer_config_is_rejected() {
    QTemporaryDir dir;
    write_file(dir.filePath("tokenizer.json"), tokenizer_json(R"(["a b"])", kByteLevelPre));
    write_file(dir.filePath("tokenizer_config.json"), "{\"add_bos_token\": tru");
    auto r = load_hf_tokenizer(dir.path().toStdString());
    QVERIFY(!r);
    QVERIFY2(r.status().message().find("tokenizer_config.json") != std::string::npos,
             r.status().message().c_str());
  }

  void garbage_tokenizer_model_is_rejected() {
    for (const std::string& bytes : {std::string(), std::string("\x0A\xFF\xFF\xFF\x0F junk", 10),
                                     std::string("not a model at all")}) {
      QTemporaryDir dir;
      write_file(dir.filePath("tokenizer.model"), bytes);
      auto r = load_hf_tokenizer(dir.path().toStdString());
      QVERIFY(!r);
      QCOMPARE(r.status().code(), ErrorCode::kCorruptFile);
      QVERIFY2(r.status().message().find("tokenizer.model") != std::string::npos,
               r.status().message().c_str());
    }
  }

  void bad_gguf_vocabularies_are_rejected() {
    struct Case {
      GgufTokenizerData data;
      ErrorCode code;
      std::string needle;
    };
    std::vector<Case> cases;
    GgufTokenizerData d = bpe_gguf();
    d.tokens.clear();
    cases.push_back({d, ErrorCode::kCorruptFile, "tokenizer.ggml.tokens is missing"});
    d = bpe_gguf();
    d.model = "t5";
    cases.push_back({d, ErrorCode::kUnsupported, "'t5'"});
    d = bpe_gguf();
    d.model.clear();
    cases.push_back({d, ErrorCode::kCorruptFile, "tokenizer.ggml.model is missing"});
    d = bpe_gguf();
    d.token_types.pop_back();
    cases.push_back({d, ErrorCode::kCorruptFile, "token_type has 3 entries for 4 tokens"});
    d = bpe_gguf();
    d.bos_id = 4;
    cases.push_back({d, ErrorCode::kCorruptFile, "bos_token_id is 4"});
    d = bpe_gguf();
    d.merges.clear();
    cases.push_back({d, ErrorCode::kCorruptFile, "merges is missing"});
    d = bpe_gguf();
    d.merges = {"a  b"};
    cases.push_back({d, ErrorCode::kCorruptFile, "merges[0]"});
    d = bpe_gguf();
    d.merges = {"a x"};
    cases.push_back({d, ErrorCode::kCorruptFile, "'x', which is not in the vocabulary"});
    d = bpe_gguf();
    d.add_bos = 1;  // and no bos id
    cases.push_back({d, ErrorCode::kCorruptFile, "adds a BOS token"});
    d = spm_gguf();
    d.scores.pop_back();
    cases.push_back({d, ErrorCode::kCorruptFile, "scores has 6 entries for 7 tokens"});
    d = spm_gguf();
    d.token_types[0] = 1;
    d.unk_id = -1;
    cases.push_back({d, ErrorCode::kCorruptFile, "no unknown token"});
    d = spm_gguf();
    d.tokens[5] = "a";
    cases.push_back({d, ErrorCode::kCorruptFile, "'a' appears twice"});
    d = spm_gguf();
    d.tokens[4].clear();
    cases.push_back({d, ErrorCode::kCorruptFile, "piece 4 is empty"});
    d = spm_gguf();
    d.token_types[3] = 9;
    cases.push_back({d, ErrorCode::kCorruptFile, "token_type[3] is 9"});
    for (const Case& c : cases) {
      auto r = load_gguf_tokenizer(c.data);
      QVERIFY2(!r, c.needle.c_str());
      QVERIFY2(r.status().code() == c.code, r.status().message().c_str());
      QVERIFY2(r.status().message().find(c.needle) != std::string::npos,
               r.status().message().c_str());
    }
  }

  void small_gguf_vocabularies_load() {
    auto bpe = load_gguf_tokenizer(bpe_gguf());
    LATHE_QVERIFY_RESULT(bpe);
    QCOMPARE((*bpe)->encode("ab<|end|>ba"), (std::vector<TokenId>{2, 3, 1, 0}));
    QVERIFY((*bpe)->is_special(3));
    QVERIFY(!(*bpe)->add_bos());

    auto spm = load_gguf_tokenizer(spm_gguf());
    LATHE_QVERIFY_RESULT(spm);
    QCOMPARE((*spm)->kind(), std::string("spm"));
    QCOMPARE((*spm)->encode("a b"), (std::vector<TokenId>{1, 6, 3, 5}));
    QCOMPARE((*spm)->decode({1, 6, 3, 5}), std::string("<s>a b"));
    QCOMPARE((*spm)->decode({1, 6, 3, 5}, true), std::string("a b"));
    QCOMPARE((*spm)->token_bytes(6), std::string(" a"));
  }

  void spm_proto_round_trips() {
    SpmModelSpec spec;
    spec.pieces = {{"<unk>", 0.f, SpmPieceType::kUnknown},
                   {"<0x41>", 0.f, SpmPieceType::kByte},
                   {"\xE2\x96\x81x", -1.5f, SpmPieceType::kNormal}};
    spec.model_type = 2;
    spec.byte_fallback = true;
    spec.add_dummy_prefix = false;
    spec.normalizer_name = "identity";
    auto back = parse_spm_model(serialize_spm_model(spec));
    LATHE_QVERIFY_RESULT(back);
    QCOMPARE(back->pieces.size(), size_t{3});
    QCOMPARE(back->pieces[2].piece, spec.pieces[2].piece);
    QCOMPARE(back->pieces[2].score, -1.5f);
    QCOMPARE(back->pieces[1].type, SpmPieceType::kByte);
    QCOMPARE(back->model_type, 2);
    QVERIFY(back->byte_fallback && !back->add_dummy_prefix);
    QCOMPARE(back->normalizer_name, std::string("identity"));
    QVERIFY(!parse_spm_model(serialize_spm_model(spec).substr(0, 20)));  // truncated
  }
};

QTEST_GUILESS_MAIN(TokenizerUnitsTest)
#include "tokenizer_units_test.moc"
