// Prompts for `lathe bench serve`, as vLLM's benchmark_serving builds them.
//
//   random   input lengths uniform in [input_len * (1 - r), input_len * (1 + r)] (r =
//   --range-ratio),
//            output lengths likewise; each prompt distinct from the first token on, so no two share
//            a cacheable prefix. With --prefix-len P every prompt starts with the same P tokens.
//   prefix   the same with a shared prefix of --prefix-len tokens (default 512) before each random
//            part: exercises prefix caching.
//   FILE     a .jsonl file, one object per line: {"prompt": "..."} or {"prompt_token_ids": [...]},
//            optionally with "output_len" (else --output-len). Lines are used in order, cycling.
//
// Prompts come as token ids (exact lengths; for servers that accept them in /v1/completions, such
// as Lathe and vLLM, and for models without a tokenizer) or as text. vLLM decodes random ids with
// the model's tokenizer; without one, text prompts here are random common English words, about one
// token each with any BPE or SentencePiece vocabulary, and the reported input tokens are the
// server's usage.prompt_tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct BenchPrompt {
  std::string text;                // text prompt (empty when token_ids is used)
  std::vector<int32_t> token_ids;  // token-id prompt
  int32_t prompt_len = 0;  // tokens: exact for ids, intended for generated text, 0 if unknown
  int32_t output_len = 0;  // max_tokens to ask for
};

struct DatasetOptions {
  std::string dataset = "random";  // random | prefix | path to a .jsonl file
  int32_t num_prompts = 1000;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0.0;  // [0, 1)
  int32_t prefix_len = 0;    // shared prefix tokens (prefix default: 512)
  uint64_t seed = 0;
  bool token_ids = false;  // build token-id prompts (random / prefix)
  int64_t vocab_size = 0;  // needed for token ids
};

Result<std::vector<BenchPrompt>> make_bench_dataset(const DatasetOptions& options);

}  // namespace lathe
