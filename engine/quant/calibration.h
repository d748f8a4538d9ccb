// Calibration data for `lathe quantize -s gptq|awq`: token sequences that are run through the model
// layer by layer to collect each linear's input statistics (Hessians, activation means).
//
// Sources:
//   - the built-in default set: calibration.txt in the text cache (scripts/fetch-eval-text.sh:
//     dataset-build's multilingual, code and maths text made for llama.cpp imatrix calibration);
//   - --calibration FILE, one of
//       plain text                 any UTF-8 text;
//       JSONL                      one JSON object per line: {"messages": [{"role", "content"}...]}
//                                  (OpenAI chat), {"conversations": [{"from", "value"}...]}
//                                  (ShareGPT) or {"text": "..."};
//       ShareGPT JSON              an array of {"conversations": [{"from": "human"|"gpt"|"system",
//                                  "value"}...]} objects, read one object at a time (a truncated
//                                  file ends at its last whole object).
// Conversations are rendered with the model's chat template (no generation prompt) and tokenized
// with special tokens recognized; plain text is tokenized as data.
//
// Sampling: num_samples sequences of seq_len tokens. Plain text: spans spread evenly over the
// whole file (each starting at a line or word start), so a multilingual file contributes every
// language. Conversations: the rendered conversations in file order, joined into one token stream
// and cut into seq_len pieces. A source too short for num_samples x seq_len gives fewer samples
// (CalibrationSet::note says so); one with fewer than kMinCalibrationTokens tokens is an error.
//
// Without a tokenizer (`--load-format dummy`: random weights), random_calibration() gives
// num_samples sequences of seq_len uniformly random token ids instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

constexpr int64_t kMinCalibrationTokens = 16;

struct CalibrationConfig {
  std::string file;           // empty: the built-in default set (default_calibration_path())
  int32_t num_samples = 128;  // sequences (the anchors' 128 x 512)
  int32_t seq_len = 512;      // tokens per sequence
};

enum class CalibrationFormat { kText, kJsonl, kShareGpt, kRandom };
// "text", "jsonl", "sharegpt", "random token ids"
const char* calibration_format_name(CalibrationFormat f);

struct CalibrationSet {
  std::vector<std::vector<TokenId>> samples;  // each at most seq_len tokens, at least 2
  std::string origin;                         // the file read
  CalibrationFormat format = CalibrationFormat::kText;
  int64_t conversations = 0;  // conversations rendered (JSONL / ShareGPT)
  std::string note;           // set when fewer samples than asked were available
  int64_t num_tokens() const;
};

// The default set's path: $LATHE_TEXT_DIR, else $XDG_CACHE_HOME/lathe/text, else
// ~/.cache/lathe/text; then calibration.txt.
std::string default_calibration_path();

// Checks the sizes only (before a model is loaded): num_samples >= 1 and seq_len >= 2, and that the
// file (or the default set) exists. The default set's absence says to run
// scripts/fetch-eval-text.sh.
Status check_calibration_config(const CalibrationConfig& config);
// The sizes alone (random_calibration() reads no file).
Status check_calibration_sizes(const CalibrationConfig& config);

// Reads, detects the format, renders and tokenizes. `chat_template` is the model's Jinja source
// (empty: conversations are refused with a message). Errors: an empty file, one that is not text,
// a JSONL line that is not a JSON object or has no messages / conversations / text (the line is
// named), a chat template that fails on a conversation, too few tokens.
Result<CalibrationSet> load_calibration(const CalibrationConfig& config, const Tokenizer& tokenizer,
                                        const std::string& chat_template);

// num_samples sequences of seq_len token ids uniform in [0, vocab_size), the same for the same
// arguments (Philox-4x32-10, a fixed key); origin "random token ids", format kRandom. The file of
// `config` is not read. Requires check_calibration_sizes(config) and vocab_size >= 1.
CalibrationSet random_calibration(const CalibrationConfig& config, int64_t vocab_size);

}  // namespace lathe
