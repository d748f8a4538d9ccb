#include "engine/quant/tokenizer_export.h"

#include <filesystem>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "engine/core/read_file.h"
#include "engine/core/strings.h"
#include "engine/model/hf_model.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "engine/tokenizer/spm_model_proto.h"

namespace lathe {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4,
                  kTypeUnused = 5;

// A byte-level BPE pre-tokenizer under llama.cpp's name, as Lathe's GGUF loader reads the name.
struct BpeFlavor {
  const char* gguf_name;
  PreTokenizer pre;
  TextNormalization normalization;
  bool ignore_merges;
  bool add_bos_default;
};

std::vector<BpeFlavor> bpe_flavors() {
  return {{"llama-bpe", PreTokenizer::llama3(), TextNormalization::kNone, true, true},
          {"qwen2", PreTokenizer::qwen2(), TextNormalization::kNfc, false, false},
          {"smollm", PreTokenizer::smollm2(), TextNormalization::kNone, false, false},
          {"gpt-2", PreTokenizer::gpt2(), TextNormalization::kNone, false, false}};
}

bool same_steps(const std::vector<PreTokenizerStep>& a, const std::vector<PreTokenizerStep>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const PreTokenizerStep &x = a[i], &y = b[i];
    if (x.kind != y.kind) return false;
    if (x.kind == PreTokenizerStep::Kind::kSplit && x.rule != y.rule) return false;
    if (x.kind == PreTokenizerStep::Kind::kDigits && x.individual_digits != y.individual_digits)
      return false;
    if (x.kind == PreTokenizerStep::Kind::kByteLevel &&
        (x.use_regex != y.use_regex || x.add_prefix_space != y.add_prefix_space))
      return false;
  }
  return true;
}

Result<nlohmann::json> read_json_object(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return nlohmann::json();
  LATHE_ASSIGN_OR_RETURN(std::string text, read_file(p.string()));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt_file(p.string() + ": not a JSON object");
  return j;
}

// config.json's "<key>" as one id (the first of a list); -1 when absent.
int32_t config_id(const nlohmann::json& config, const char* key) {
  if (!config.is_object()) return -1;
  const auto it = config.find(key);
  if (it == config.end()) return -1;
  if (it->is_number_integer()) return it->get<int32_t>();
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer())
    return (*it)[0].get<int32_t>();
  return -1;
}

struct VocabOut {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  std::vector<double> scores;  // SPM only
};

void pad_vocab(VocabOut& v, int64_t vocab_size, bool with_scores) {
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < vocab_size; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    v.types.push_back(kTypeUnused);
    if (with_scores) v.scores.push_back(-1000.0);
  }
}

Status add_bpe_metadata(const BpeTokenizerConfig& c, const HfSpecialTokenSettings& settings,
                        const nlohmann::json& config_json, int64_t vocab_size,
                        const std::string& source, GgufMetadata& m) {
  const BpeFlavor* flavor = nullptr;
  const std::vector<BpeFlavor> flavors = bpe_flavors();
  for (const BpeFlavor& f : flavors)
    if (same_steps(f.pre.steps(), c.pre_tokenizer.steps()) && f.normalization == c.normalization &&
        f.ignore_merges == c.ignore_merges)
      flavor = &f;
  if (flavor == nullptr)
    return unsupported(source +
                       ": its pre-tokenizer has no llama.cpp name Lathe knows (GPT-2, Llama 3, "
                       "Qwen2 and SmolLM2 rules can be written to GGUF)");
  VocabOut v;
  int64_t n = static_cast<int64_t>(c.vocab.size());
  for (const AddedToken& a : c.added_tokens) n = std::max<int64_t>(n, a.id + 1);
  v.tokens.assign(static_cast<size_t>(n), "");
  v.types.assign(static_cast<size_t>(n), kTypeNormal);
  for (size_t i = 0; i < c.vocab.size(); ++i) v.tokens[i] = c.vocab[i];
  for (const AddedToken& a : c.added_tokens) {
    v.tokens[static_cast<size_t>(a.id)] = a.content;
    v.types[static_cast<size_t>(a.id)] = a.special ? kTypeControl : kTypeUserDefined;
  }
  for (int64_t i = 0; i < n; ++i)
    if (v.tokens[static_cast<size_t>(i)].empty()) {
      v.tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
      v.types[static_cast<size_t>(i)] = kTypeUnused;
    }
  pad_vocab(v, vocab_size, false);
  auto id_of = [&](const std::string& text) -> int32_t {
    for (const AddedToken& a : c.added_tokens)
      if (a.content == text) return a.id;
    for (size_t i = 0; i < c.vocab.size(); ++i)
      if (c.vocab[i] == text) return static_cast<int32_t>(i);
    return -1;
  };
  int32_t bos = c.bos_id, eos = c.eos_id;
  if (bos < 0) bos = config_id(config_json, "bos_token_id");
  if (eos < 0) eos = config_id(config_json, "eos_token_id");
  if (settings.bos_token && id_of(*settings.bos_token) >= 0) bos = id_of(*settings.bos_token);
  if (settings.eos_token && id_of(*settings.eos_token) >= 0) eos = id_of(*settings.eos_token);
  const bool add_bos = settings.add_bos_token ? *settings.add_bos_token && bos >= 0 : c.add_bos;
  const bool add_eos = settings.add_eos_token ? *settings.add_eos_token && eos >= 0 : c.add_eos;
  std::vector<std::string> merges;
  merges.reserve(c.merges.size());
  for (const auto& [a, b] : c.merges) merges.push_back(a + " " + b);

  gguf_set(m, "tokenizer.ggml.model", gguf_string("gpt2"));
  gguf_set(m, "tokenizer.ggml.pre", gguf_string(flavor->gguf_name));
  gguf_set(m, "tokenizer.ggml.tokens", gguf_string_array(std::move(v.tokens)));
  gguf_set(m, "tokenizer.ggml.token_type", gguf_i32_array(std::move(v.types)));
  gguf_set(m, "tokenizer.ggml.merges", gguf_string_array(std::move(merges)));
  if (bos >= 0) gguf_set(m, "tokenizer.ggml.bos_token_id", gguf_u32(static_cast<uint32_t>(bos)));
  if (eos >= 0) gguf_set(m, "tokenizer.ggml.eos_token_id", gguf_u32(static_cast<uint32_t>(eos)));
  const int32_t pad = config_id(config_json, "pad_token_id");
  if (pad >= 0)
    gguf_set(m, "tokenizer.ggml.padding_token_id", gguf_u32(static_cast<uint32_t>(pad)));
  gguf_set(m, "tokenizer.ggml.add_bos_token", gguf_bool(add_bos));
  gguf_set(m, "tokenizer.ggml.add_eos_token", gguf_bool(add_eos));
  return Status();
}

Status add_spm_metadata(const fs::path& model_path, const HfSpecialTokenSettings& settings,
                        int64_t vocab_size, GgufMetadata& m) {
  LATHE_ASSIGN_OR_RETURN(std::string bytes, read_file(model_path.string()));
  Result<SpmModelSpec> parsed = parse_spm_model(bytes);
  if (!parsed.is_ok()) return parsed.status().with_context(model_path.string());
  const SpmModelSpec& spec = *parsed;
  VocabOut v;
  int32_t bos = -1, eos = -1, unk = -1;
  for (size_t i = 0; i < spec.pieces.size(); ++i) {
    const SpmPiece& p = spec.pieces[i];
    v.tokens.push_back(p.piece);
    v.scores.push_back(p.score);
    v.types.push_back(static_cast<int64_t>(p.type));
    const int32_t id = static_cast<int32_t>(i);
    if (p.type == SpmPieceType::kUnknown && unk < 0) unk = id;
    if (p.piece == settings.bos_token.value_or(spec.bos_piece)) bos = id;
    if (p.piece == settings.eos_token.value_or(spec.eos_piece)) eos = id;
  }
  pad_vocab(v, vocab_size, true);
  gguf_set(m, "tokenizer.ggml.model", gguf_string("llama"));
  gguf_set(m, "tokenizer.ggml.pre", gguf_string("default"));
  gguf_set(m, "tokenizer.ggml.tokens", gguf_string_array(std::move(v.tokens)));
  gguf_set(m, "tokenizer.ggml.scores", gguf_f32_array(std::move(v.scores)));
  gguf_set(m, "tokenizer.ggml.token_type", gguf_i32_array(std::move(v.types)));
  if (bos >= 0) gguf_set(m, "tokenizer.ggml.bos_token_id", gguf_u32(static_cast<uint32_t>(bos)));
  if (eos >= 0) gguf_set(m, "tokenizer.ggml.eos_token_id", gguf_u32(static_cast<uint32_t>(eos)));
  if (unk >= 0)
    gguf_set(m, "tokenizer.ggml.unknown_token_id", gguf_u32(static_cast<uint32_t>(unk)));
  gguf_set(m, "tokenizer.ggml.add_bos_token", gguf_bool(settings.add_bos_token.value_or(true)));
  gguf_set(m, "tokenizer.ggml.add_eos_token", gguf_bool(settings.add_eos_token.value_or(false)));
  gguf_set(m, "tokenizer.ggml.add_space_prefix", gguf_bool(spec.add_dummy_prefix));
  return Status();
}

ojson byte_level(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

ojson pre_tokenizer_json(const PreTokenizer& pre) {
  ojson steps = ojson::array();
  for (const PreTokenizerStep& s : pre.steps()) {
    switch (s.kind) {
      case PreTokenizerStep::Kind::kSplit:
        steps.push_back({{"type", "Split"},
                         {"pattern", {{"Regex", std::string(split_rule_pattern(s.rule))}}},
                         {"behavior", "Isolated"},
                         {"invert", false}});
        break;
      case PreTokenizerStep::Kind::kDigits:
        steps.push_back({{"type", "Digits"}, {"individual_digits", s.individual_digits}});
        break;
      case PreTokenizerStep::Kind::kByteLevel:
        steps.push_back(byte_level(s.add_prefix_space, s.use_regex));
        break;
    }
  }
  if (steps.size() == 1) return steps[0];
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

const std::string& token_or_empty(const GgufTokenizerData& d, int32_t id) {
  static const std::string empty;
  return id >= 0 && static_cast<size_t>(id) < d.tokens.size() ? d.tokens[static_cast<size_t>(id)]
                                                              : empty;
}

Result<std::string> bpe_tokenizer_json(const GgufTokenizerData& d, bool add_bos, bool add_eos) {
  const std::vector<BpeFlavor> flavors = bpe_flavors();
  const BpeFlavor* flavor = &flavors.back();  // GPT-2's rules for unknown names, as the loader
  for (const BpeFlavor& f : flavors)
    if (d.pre == f.gguf_name ||
        (std::string(f.gguf_name) == "llama-bpe" && (d.pre == "llama3" || d.pre == "llama-v3")) ||
        (std::string(f.gguf_name) == "qwen2" && d.pre == "deepseek-r1-qwen"))
      flavor = &f;
  ojson added = ojson::array();
  // The vocabulary object is written by hand: ordered_json's object inserts are linear, and
  // vocabularies have 150k entries.
  std::string vocab = "{";
  std::set<std::string> seen;
  for (size_t id = 0; id < d.tokens.size(); ++id) {
    const int32_t type = d.token_types.empty() ? kTypeNormal : d.token_types[id];
    if (type == kTypeControl || type == kTypeUserDefined) {
      added.push_back({{"id", id},
                       {"content", d.tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == kTypeControl}});
      continue;
    }
    if (!seen.insert(d.tokens[id]).second)
      return unsupported("GGUF tokenizer: token " + std::to_string(id) + " ('" + d.tokens[id] +
                         "') appears twice; it cannot be written as a tokenizer.json vocabulary");
    if (vocab.size() > 1) vocab += ',';
    vocab += ojson(d.tokens[id]).dump() + ':' + std::to_string(id);
  }
  vocab += '}';
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] =
      flavor->normalization == TextNormalization::kNfc ? ojson({{"type", "NFC"}}) : ojson(nullptr);
  j["pre_tokenizer"] = pre_tokenizer_json(flavor->pre);
  ojson single = ojson::array(), pair = ojson::array(), specials = ojson::object();
  auto special = [&](int32_t id, int type_id) {
    return ojson{{"SpecialToken", {{"id", token_or_empty(d, id)}, {"type_id", type_id}}}};
  };
  auto seq = [](const char* s, int type_id) {
    return ojson{{"Sequence", {{"id", s}, {"type_id", type_id}}}};
  };
  if (add_bos) {
    single.push_back(special(d.bos_id, 0));
    pair.push_back(special(d.bos_id, 0));
  }
  single.push_back(seq("A", 0));
  pair.push_back(seq("A", 0));
  if (add_eos) {
    single.push_back(special(d.eos_id, 0));
    pair.push_back(special(d.eos_id, 0));
  }
  if (add_bos) pair.push_back(special(d.bos_id, 1));
  pair.push_back(seq("B", 1));
  if (add_eos) pair.push_back(special(d.eos_id, 1));
  for (int32_t id : {add_bos ? d.bos_id : -1, add_eos ? d.eos_id : -1})
    if (id >= 0)
      specials[token_or_empty(d, id)] = {
          {"id", token_or_empty(d, id)}, {"ids", {id}}, {"tokens", {token_or_empty(d, id)}}};
  if (add_bos || add_eos) {
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", single},
                           {"pair", pair},
                           {"special_tokens", specials}};
  } else {
    j["post_processor"] = byte_level(true, false);
  }
  j["decoder"] = byte_level(true, true);
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", flavor->ignore_merges},
                {"vocab", "@vocab@"},
                {"merges", d.merges}};
  std::string text = j.dump();
  const std::string placeholder = "\"@vocab@\"";
  text.replace(text.find(placeholder), placeholder.size(), vocab);
  return text;
}

}  // namespace

Result<GgufMetadata> gguf_tokenizer_metadata_from_hf(const std::string& folder,
                                                     int64_t vocab_size) {
  const fs::path dir(folder);
  std::error_code ec;
  LATHE_ASSIGN_OR_RETURN(HfSpecialTokenSettings settings, read_hf_special_token_settings(folder));
  LATHE_ASSIGN_OR_RETURN(nlohmann::json config_json, read_json_object(dir / "config.json"));
  GgufMetadata m;
  const fs::path json_path = dir / "tokenizer.json", model_path = dir / "tokenizer.model";
  bool done = false;
  if (fs::exists(json_path, ec)) {
    LATHE_ASSIGN_OR_RETURN(std::string text, read_file(json_path.string()));
    BpeTokenizerConfig config;
    std::string kind_name;
    LATHE_ASSIGN_OR_RETURN(HfTokenizerJsonKind kind,
                           parse_hf_tokenizer_json(text, json_path.string(), &config, &kind_name));
    if (kind == HfTokenizerJsonKind::kByteLevelBpe) {
      LATHE_RETURN_IF_ERROR(
          add_bpe_metadata(config, settings, config_json, vocab_size, json_path.string(), m));
      done = true;
    } else if (!fs::exists(model_path, ec)) {
      return unsupported(json_path.string() + ": a " + kind_name +
                         " tokenizer cannot be written to GGUF without its tokenizer.model");
    }
  }
  if (!done) {
    if (!fs::exists(model_path, ec))
      return not_found(folder + ": no tokenizer.json or tokenizer.model to write into the GGUF");
    LATHE_RETURN_IF_ERROR(add_spm_metadata(model_path, settings, vocab_size, m));
  }
  LATHE_ASSIGN_OR_RETURN(std::string chat_template, read_hf_chat_template(folder));
  if (!chat_template.empty()) gguf_set(m, "tokenizer.chat_template", gguf_string(chat_template));
  return m;
}

Result<GgufMetadata> gguf_tokenizer_metadata_from_gguf(const std::string& path,
                                                       int64_t vocab_size) {
  LATHE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> g, GgufFile::open(path));
  GgufMetadata out;
  for (const auto& [key, value] : g->metadata())
    if (starts_with(key, "tokenizer.")) out.emplace_back(key, value);
  const GgufValue* tokens = gguf_find(out, "tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::kArray)
    return invalid_argument(path + ": no tokenizer.ggml.tokens: not a GGUF file with a vocabulary");
  if (tokens->array_size() != vocab_size)
    return invalid_argument(strformat(
        "%s: the vocabulary has %lld tokens but the model's embedding has %lld rows; take a "
        "vocabulary of the model's size",
        path.c_str(), static_cast<long long>(tokens->array_size()),
        static_cast<long long>(vocab_size)));
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> hf_tokenizer_files_from_gguf(
    const GgufTokenizerData& d, const std::string& chat_template, int64_t model_max_length) {
  std::vector<std::pair<std::string, std::string>> files;
  const bool bpe = d.model == "gpt2";
  if (!bpe && d.model != "llama")
    return unsupported("GGUF tokenizer model '" + d.model +
                       "' cannot be written as a Hugging Face tokenizer");
  bool add_bos = d.add_bos >= 0 ? d.add_bos != 0 : !bpe;
  if (bpe && d.add_bos < 0)
    add_bos = d.pre == "llama-bpe" || d.pre == "llama3" || d.pre == "llama-v3";
  const bool add_eos = d.add_eos > 0;
  if (bpe) {
    LATHE_ASSIGN_OR_RETURN(
        std::string tok, bpe_tokenizer_json(d, add_bos && d.bos_id >= 0, add_eos && d.eos_id >= 0));
    files.emplace_back("tokenizer.json", std::move(tok));
  } else {
    LATHE_ASSIGN_OR_RETURN(SpmModelSpec spec, spm_model_spec_from_gguf(d));
    files.emplace_back("tokenizer.model", serialize_spm_model(spec));
  }
  ojson tc;
  tc["add_bos_token"] = add_bos;
  tc["add_eos_token"] = add_eos;
  if (d.bos_id >= 0) tc["bos_token"] = token_or_empty(d, d.bos_id);
  if (d.eos_id >= 0) tc["eos_token"] = token_or_empty(d, d.eos_id);
  if (d.unk_id >= 0) tc["unk_token"] = token_or_empty(d, d.unk_id);
  if (d.pad_id >= 0) tc["pad_token"] = token_or_empty(d, d.pad_id);
  tc["clean_up_tokenization_spaces"] = false;
  tc["model_max_length"] = model_max_length;
  tc["tokenizer_class"] = bpe ? "PreTrainedTokenizerFast" : "LlamaTokenizer";
  if (!chat_template.empty()) tc["chat_template"] = chat_template;
  files.emplace_back("tokenizer_config.json", tc.dump(2) + "\n");
  return files;
}

}  // namespace lathe
