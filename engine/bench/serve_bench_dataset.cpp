#include "engine/bench/serve_bench_dataset.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>

#include "engine/core/strings.h"

namespace lathe {
namespace {

// Common English words that are single tokens in GPT-2/Llama/Qwen-style vocabularies when preceded
// by a space.
constexpr const char* kWords[] = {
    "the",       "of",       "and",       "to",      "in",     "is",        "it",
    "that",      "for",      "was",       "on",      "are",    "as",        "with",
    "his",       "they",     "at",        "be",      "this",   "have",      "from",
    "or",        "one",      "had",       "by",      "word",   "but",       "not",
    "what",      "all",      "were",      "we",      "when",   "your",      "can",
    "said",      "there",    "use",       "an",      "each",   "which",     "she",
    "do",        "how",      "their",     "if",      "will",   "up",        "other",
    "about",     "out",      "many",      "then",    "them",   "these",     "so",
    "some",      "her",      "would",     "make",    "like",   "him",       "into",
    "time",      "has",      "look",      "two",     "more",   "write",     "go",
    "see",       "number",   "no",        "way",     "could",  "people",    "my",
    "than",      "first",    "water",     "been",    "call",   "who",       "oil",
    "its",       "now",      "find",      "long",    "down",   "day",       "did",
    "get",       "come",     "made",      "may",     "part",   "over",      "new",
    "sound",     "take",     "only",      "little",  "work",   "know",      "place",
    "year",      "live",     "me",        "back",    "give",   "most",      "very",
    "after",     "thing",    "our",       "just",    "name",   "good",      "man",
    "think",     "say",      "great",     "where",   "help",   "through",   "much",
    "before",    "line",     "right",     "too",     "mean",   "old",       "any",
    "same",      "tell",     "boy",       "follow",  "came",   "want",      "show",
    "also",      "around",   "form",      "three",   "small",  "set",       "put",
    "end",       "does",     "another",   "well",    "large",  "must",      "big",
    "even",      "such",     "because",   "turn",    "here",   "why",       "ask",
    "went",      "men",      "read",      "need",    "land",   "different", "home",
    "us",        "move",     "try",       "kind",    "hand",   "picture",   "again",
    "change",    "off",      "play",      "spell",   "air",    "away",      "animal",
    "house",     "point",    "page",      "letter",  "mother", "answer",    "found",
    "study",     "still",    "learn",     "should",  "world",  "high",      "every",
    "near",      "add",      "food",      "between", "own",    "below",     "country",
    "plant",     "last",     "school",    "father",  "keep",   "tree",      "never",
    "start",     "city",     "earth",     "eye",     "light",  "thought",   "head",
    "under",     "story",    "saw",       "left",    "few",    "while",     "along",
    "might",     "close",    "something", "seem",    "next",   "hard",      "open",
    "example",   "begin",    "life",      "always",  "those",  "both",      "paper",
    "together",  "got",      "group",     "often",   "run",    "important", "until",
    "children",  "side",     "feet",      "car",     "mile",   "night",     "walk",
    "white",     "sea",      "began",     "grow",    "took",   "river",     "four",
    "carry",     "state",    "once",      "book",    "hear",   "stop",      "without",
    "second",    "later",    "miss",      "idea",    "enough", "eat",       "face",
    "watch",     "far",      "really",    "almost",  "let",    "above",     "girl",
    "sometimes", "mountain", "cut",       "young",   "talk",   "soon",      "list",
    "song",      "being",    "leave",     "family"};
constexpr int kNumWords = static_cast<int>(sizeof(kWords) / sizeof(kWords[0]));

std::string random_words(std::mt19937_64& rng, int32_t n) {
  std::uniform_int_distribution<int> pick(0, kNumWords - 1);
  std::string s;
  for (int32_t i = 0; i < n; ++i) {
    if (i > 0) s += ' ';
    s += kWords[pick(rng)];
  }
  return s;
}

// vLLM's RandomDataset bounds: [floor(len * (1 - r)), ceil(len * (1 + r))].
std::pair<int32_t, int32_t> length_range(int32_t len, double r, int32_t min_len) {
  const int32_t lo = std::max<int32_t>(min_len, static_cast<int32_t>(std::floor(len * (1.0 - r))));
  const int32_t hi = std::max<int32_t>(lo, static_cast<int32_t>(std::ceil(len * (1.0 + r))));
  return {lo, hi};
}

Result<std::vector<BenchPrompt>> synthetic(const DatasetOptions& o, int32_t prefix_len) {
  if (o.input_len < 1) return invalid_argument("--input-len must be >= 1");
  if (o.output_len < 1) return invalid_argument("--output-len must be >= 1");
  if (!(o.range_ratio >= 0.0 && o.range_ratio < 1.0))
    return invalid_argument(strformat("--range-ratio must be in [0, 1), got %g", o.range_ratio));
  if (prefix_len < 0) return invalid_argument("--prefix-len must be >= 0");
  if (o.token_ids && o.vocab_size <= 0)
    return invalid_argument(
        "token-id prompts need the vocabulary size: pass --vocab-size (Lathe reports it in "
        "/v1/models)");
  std::mt19937_64 rng(o.seed);
  const auto [in_lo, in_hi] = length_range(o.input_len, o.range_ratio, 1);
  const auto [out_lo, out_hi] = length_range(o.output_len, o.range_ratio, 1);
  std::uniform_int_distribution<int32_t> in_len(in_lo, in_hi), out_len(out_lo, out_hi);
  std::vector<int32_t> prefix_ids;
  std::string prefix_text;
  if (o.token_ids) {
    std::uniform_int_distribution<int64_t> tok(0, o.vocab_size - 1);
    for (int32_t i = 0; i < prefix_len; ++i) prefix_ids.push_back(static_cast<int32_t>(tok(rng)));
  } else if (prefix_len > 0) {
    prefix_text = random_words(rng, prefix_len) + " ";
  }
  std::uniform_int_distribution<int64_t> offset(0, std::max<int64_t>(0, o.vocab_size - 1));
  std::vector<BenchPrompt> out;
  out.reserve(o.num_prompts);
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    BenchPrompt p;
    const int32_t n = in_len(rng);
    p.output_len = out_len(rng);
    p.prompt_len = prefix_len + n;
    if (o.token_ids) {
      // As vLLM: (offset_i + i + arange(n)) % vocab after the shared prefix.
      const int64_t off = offset(rng);
      p.token_ids = prefix_ids;
      for (int32_t k = 0; k < n; ++k)
        p.token_ids.push_back(static_cast<int32_t>((off + i + k) % o.vocab_size));
    } else {
      p.text = prefix_text + random_words(rng, n);
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<BenchPrompt>> from_jsonl(const DatasetOptions& o) {
  std::ifstream in(o.dataset);
  if (!in)
    return not_found("--dataset: cannot open '" + o.dataset +
                     "' (expected random, prefix or a .jsonl file)");
  std::vector<BenchPrompt> lines;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where =
        strformat("%s:%lld", o.dataset.c_str(), static_cast<long long>(line_no));
    if (j.is_discarded() || !j.is_object())
      return invalid_argument(where +
                              ": not a JSON object; write one {\"prompt\": \"...\"} per line");
    BenchPrompt p;
    p.output_len = o.output_len;
    if (auto it = j.find("prompt"); it != j.end() && it->is_string()) {
      p.text = it->get<std::string>();
    } else if (auto ids = j.find("prompt_token_ids");
               ids != j.end() && ids->is_array() && !ids->empty()) {
      for (const auto& t : *ids) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0)
          return invalid_argument(where + ": prompt_token_ids holds a non-id");
        p.token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      p.prompt_len = static_cast<int32_t>(p.token_ids.size());
    } else {
      return invalid_argument(
          where + ": needs \"prompt\" (a string) or \"prompt_token_ids\" (a list of ids)");
    }
    if (auto it = j.find("output_len"); it != j.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > (1 << 30))
        return invalid_argument(where + ": output_len must be a positive integer");
      p.output_len = static_cast<int32_t>(it->get<int64_t>());
    }
    lines.push_back(std::move(p));
  }
  if (lines.empty()) return invalid_argument("--dataset '" + o.dataset + "' has no prompts");
  std::vector<BenchPrompt> out;
  out.reserve(o.num_prompts);
  for (int32_t i = 0; i < o.num_prompts; ++i)
    out.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return out;
}

}  // namespace

Result<std::vector<BenchPrompt>> make_bench_dataset(const DatasetOptions& o) {
  if (o.num_prompts < 1) return invalid_argument("--num-prompts must be >= 1");
  if (o.dataset == "random") return synthetic(o, o.prefix_len);
  if (o.dataset == "prefix") return synthetic(o, o.prefix_len > 0 ? o.prefix_len : 512);
  return from_jsonl(o);
}

}  // namespace lathe
