// Pre-tokenization for byte-level BPE: splits text into the pieces BPE merges within. Each split
// rule is a hand-written matcher equivalent to one regex of a model family (no regex engine), and a
// pre-tokenizer is a sequence of steps, as in tokenizer.json:
//
//   GPT-2 / ByteLevel(use_regex): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
//   ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ Llama 3:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//             \s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:    the Llama 3 rule with \p{N} (single digits)
//   SmolLM2:  Digits(individual_digits) then ByteLevel(use_regex)
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

enum class SplitRule { kGpt2, kLlama3, kQwen2 };

const char* split_rule_name(SplitRule rule);
// The rule whose regex is `pattern` (a tokenizer.json Split pattern), or nullopt when none is.
std::optional<SplitRule> split_rule_from_pattern(std::string_view pattern);
// The rule's regex as tokenizer.json files spell it (split_rule_from_pattern's first spelling).
std::string_view split_rule_pattern(SplitRule rule);

struct PreTokenizerStep {
  enum class Kind {
    kSplit,      // isolate every match of `rule`
    kDigits,     // isolate digits (\p{N}); individually or as runs
    kByteLevel,  // optionally prefix a space, then (use_regex) split with the GPT-2 rule
  };
  Kind kind = Kind::kSplit;
  SplitRule rule = SplitRule::kGpt2;  // kSplit
  bool individual_digits = false;     // kDigits
  bool add_prefix_space = false;      // kByteLevel: prepend " " to each piece not starting with one
  bool use_regex = true;              // kByteLevel
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // The pre-tokenizers of the model families (see the file comment).
  static PreTokenizer gpt2();
  static PreTokenizer llama3();
  static PreTokenizer qwen2();
  static PreTokenizer smollm2();

  // Splits `text` into pieces and appends them to `out`. Pieces are views into `text`, or into
  // strings appended to `storage` (pieces that gained a prefix space); both must outlive them.
  // Invalid UTF-8 bytes count as punctuation-like characters, so no input byte is ever dropped.
  void split(std::string_view text, std::vector<std::string_view>& out,
             std::deque<std::string>& storage) const;

  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

 private:
  std::vector<PreTokenizerStep> steps_;
};

// One split rule applied to a whole string (exposed for tests): the matched pieces, in order.
std::vector<std::string_view> split_with_rule(std::string_view text, SplitRule rule);

}  // namespace lathe
