// Which built-in calibration set a model gets when `lathe quantize -s gptq|awq` is run without
// --calibration: the English part (calibration-en.txt) for an English-only model, else the whole
// multilingual set (calibration.txt). GPTQ fits each layer to its calibration Hessian, so an
// English-only model calibrated on text that is mostly other languages (which its tokenizer sees
// as byte tokens) loses most of GPTQ's advantage (docs/QUANTIZATION.md, "GPTQ and the calibration
// text").
//
// The decision, in order:
//   1. the languages the model declares: GGUF `general.languages`, or the `language:` field of an
//      HF folder's README.md front matter (the model card). English-only when every entry is "en",
//      "en-*"/"en_*" or "english"; multilingual when any entry is another language;
//   2. otherwise its vocabulary: the share of the (non-special) tokens whose bytes hold a letter
//      outside English's alphabet (a whole UTF-8 code point >= U+00C0 that is not punctuation or a
//      symbol of U+2000..U+2BFF: accented Latin, Greek, Cyrillic, Arabic, Indic, CJK, ...).
//      English-only below kEnglishOnlyMaxShare (SmolLM2: 457 of 49,152 tokens, 0.9%;
//      multilingual vocabularies such as Qwen2.5's hold tens of thousands of CJK tokens alone).
// An English-only model whose calibration-en.txt is missing gets the whole set, with a reason
// that says how to fetch the English one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/quant_source.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

constexpr double kEnglishOnlyMaxShare = 0.03;

// True when `bytes` hold a whole UTF-8 code point >= U+00C0 outside U+2000..U+2BFF.
bool has_non_english_letter(std::string_view bytes);

struct VocabLanguageShare {
  int64_t tokens = 0;       // non-special tokens looked at
  int64_t non_english = 0;  // of them, with a letter outside English's alphabet
  double share() const { return tokens > 0 ? static_cast<double>(non_english) / tokens : 0.0; }
};
VocabLanguageShare vocab_language_share(const std::vector<std::string>& token_bytes);
VocabLanguageShare vocab_language_share(const Tokenizer& tokenizer);

// The languages a model declares (see the file comment), lower-case; empty when it declares none
// (or its README has no front matter).
std::vector<std::string> declared_languages(const QuantSource& source);

struct CalibrationChoice {
  std::string path;      // the set to read
  bool english = false;  // path is the English set
  std::string reason;    // one line for the log: which set and why
};

// The built-in set for a model; `text_dir` holds calibration.txt and calibration-en.txt.
CalibrationChoice choose_default_calibration(const std::vector<std::string>& languages,
                                             const VocabLanguageShare& vocab,
                                             const std::string& text_dir);

}  // namespace lathe
