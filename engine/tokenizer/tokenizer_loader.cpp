#include "engine/tokenizer/tokenizer_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/log.h"
#include "engine/core/read_file.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "engine/tokenizer/spm_model_proto.h"
#include "engine/tokenizer/spm_tokenizer.h"

namespace lathe {

namespace {

namespace fs = std::filesystem;

constexpr const char* kGgufSource = "GGUF tokenizer";

// The pre-tokenizer of a GGUF tokenizer.ggml.pre name (llama.cpp's names).
struct GgufPreTokenizer {
  PreTokenizer pre_tokenizer;
  TextNormalization normalization = TextNormalization::kNone;
  bool ignore_merges = false;
  bool add_bos_default = false;
};
GgufPreTokenizer gguf_pre_tokenizer(const std::string& pre) {
  GgufPreTokenizer g{PreTokenizer::gpt2()};
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    g.pre_tokenizer = PreTokenizer::llama3();
    g.ignore_merges = true;
    g.add_bos_default = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    // Qwen2's tokenizer.json normalizes to NFC; the GGUF name stands for that tokenizer.
    g.pre_tokenizer = PreTokenizer::qwen2();
    g.normalization = TextNormalization::kNfc;
  } else if (pre == "smollm") {
    g.pre_tokenizer = PreTokenizer::smollm2();
  } else if (pre != "gpt-2" && pre != "default" && !pre.empty()) {
    log_warning(std::string(kGgufSource) + ": pre-tokenizer '" + pre +
                "' is unknown to Lathe; using GPT-2's rules, which may split some text differently "
                "from the model's own tokenizer");
  }
  return g;
}

Result<std::shared_ptr<const Tokenizer>> load_gguf_bpe(const GgufTokenizerData& d) {
  if (d.merges.empty()) {
    return corrupt_file(std::string(kGgufSource) +
                        ": tokenizer.ggml.merges is missing; a 'gpt2' vocabulary needs its merges");
  }
  BpeTokenizerConfig config;
  config.source = kGgufSource;
  config.vocab = d.tokens;
  config.merges.resize(d.merges.size());
  for (size_t i = 0; i < d.merges.size(); ++i) {
    const std::string& m = d.merges[i];
    const size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= m.size() ||
        m.find(' ', space + 1) != std::string::npos) {
      return corrupt_file(std::string(kGgufSource) + ": tokenizer.ggml.merges[" +
                          std::to_string(i) + "] '" + m +
                          "' is not two tokens separated by one space");
    }
    config.merges[i] = {m.substr(0, space), m.substr(space + 1)};
  }
  for (size_t id = 0; id < d.token_types.size(); ++id) {
    const int32_t type = d.token_types[id];
    if (type != 3 && type != 4) continue;  // control, user-defined: matched whole in the text
    AddedToken a;
    a.content = d.tokens[id];
    a.id = static_cast<TokenId>(id);
    a.special = type == 3;
    config.added_tokens.push_back(std::move(a));
  }
  GgufPreTokenizer pre = gguf_pre_tokenizer(d.pre);
  config.pre_tokenizer = std::move(pre.pre_tokenizer);
  config.normalization = pre.normalization;
  config.ignore_merges = pre.ignore_merges;
  config.bos_id = d.bos_id;
  config.eos_id = d.eos_id;
  config.add_bos = d.add_bos >= 0 ? d.add_bos != 0 : pre.add_bos_default;
  config.add_eos = d.add_eos > 0;
  LATHE_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(config)));
  return std::shared_ptr<const Tokenizer>(std::move(tokenizer));
}

}  // namespace

Result<SpmModelSpec> spm_model_spec_from_gguf(const GgufTokenizerData& d) {
  const size_t n = d.tokens.size();
  if (d.scores.size() != n) {
    return corrupt_file(std::string(kGgufSource) + ": tokenizer.ggml.scores has " +
                        std::to_string(d.scores.size()) + " entries for " + std::to_string(n) +
                        " tokens; a 'llama' (SentencePiece) vocabulary needs one score per token");
  }
  SpmModelSpec spec;
  spec.model_type = 2;  // BPE: merge the pair whose result scores highest, as llama.cpp does
  spec.normalizer_name = "identity";
  spec.add_dummy_prefix = d.add_space_prefix != 0;  // -1 (absent): SentencePiece's default, on
  spec.remove_extra_whitespaces = false;
  spec.escape_whitespaces = true;
  spec.pieces.resize(n);
  for (size_t id = 0; id < n; ++id) {
    SpmPiece& p = spec.pieces[id];
    p.piece = d.tokens[id];
    p.score = d.scores[id];
    const int32_t type = d.token_types.empty() ? 1 : d.token_types[id];
    if (type < 1 || type > 6) {
      return corrupt_file(std::string(kGgufSource) + ": tokenizer.ggml.token_type[" +
                          std::to_string(id) + "] is " + std::to_string(type) + ", expected 1..6");
    }
    p.type = static_cast<SpmPieceType>(type);
    if (p.type == SpmPieceType::kByte) spec.byte_fallback = true;
  }
  // Files without token types still name their special tokens by id.
  if (d.token_types.empty()) {
    if (d.unk_id >= 0) spec.pieces[static_cast<size_t>(d.unk_id)].type = SpmPieceType::kUnknown;
    for (const int32_t id : {d.bos_id, d.eos_id}) {
      if (id >= 0) spec.pieces[static_cast<size_t>(id)].type = SpmPieceType::kControl;
    }
  }
  int32_t unk = d.unk_id;
  for (size_t id = 0; unk < 0 && id < n; ++id) {
    if (spec.pieces[id].type == SpmPieceType::kUnknown) unk = static_cast<int32_t>(id);
  }
  if (unk >= 0) spec.unk_piece = d.tokens[static_cast<size_t>(unk)];
  if (d.bos_id >= 0) spec.bos_piece = d.tokens[static_cast<size_t>(d.bos_id)];
  if (d.eos_id >= 0) spec.eos_piece = d.tokens[static_cast<size_t>(d.eos_id)];
  if (d.pad_id >= 0) spec.pad_piece = d.tokens[static_cast<size_t>(d.pad_id)];

  return spec;
}

namespace {

Result<std::shared_ptr<const Tokenizer>> load_gguf_spm(const GgufTokenizerData& d) {
  LATHE_ASSIGN_OR_RETURN(const SpmModelSpec spec, spm_model_spec_from_gguf(d));
  SpmTokenizerOptions options;
  options.source = kGgufSource;
  options.bos_id = d.bos_id;
  options.eos_id = d.eos_id;
  options.add_bos = d.add_bos >= 0 ? d.add_bos != 0 : true;
  options.add_eos = d.add_eos > 0;
  LATHE_ASSIGN_OR_RETURN(auto tokenizer, SpmTokenizer::create(serialize_spm_model(spec), options));
  return std::shared_ptr<const Tokenizer>(std::move(tokenizer));
}

Result<std::shared_ptr<const Tokenizer>> load_hf_bpe(BpeTokenizerConfig config,
                                                     const fs::path& path,
                                                     const HfSpecialTokenSettings& settings) {
  // tokenizer_config.json names BOS/EOS by text and may switch adding them on or off.
  auto id_of = [&](const std::string& text) -> TokenId {
    for (const AddedToken& a : config.added_tokens) {
      if (a.content == text) return a.id;
    }
    for (size_t id = 0; id < config.vocab.size(); ++id) {
      if (config.vocab[id] == text) return static_cast<TokenId>(id);
    }
    return -1;
  };
  if (settings.bos_token) {
    const TokenId id = id_of(*settings.bos_token);
    if (id >= 0) config.bos_id = id;
  }
  if (settings.eos_token) {
    const TokenId id = id_of(*settings.eos_token);
    if (id >= 0) config.eos_id = id;
  }
  if (settings.add_bos_token) config.add_bos = *settings.add_bos_token && config.bos_id >= 0;
  if (settings.add_eos_token) config.add_eos = *settings.add_eos_token && config.eos_id >= 0;
  LATHE_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(config)));
  return std::shared_ptr<const Tokenizer>(std::move(tokenizer));
}

Result<std::shared_ptr<const Tokenizer>> load_hf_spm(const fs::path& path,
                                                     const HfSpecialTokenSettings& settings) {
  LATHE_ASSIGN_OR_RETURN(std::string model, read_file(path.string()));
  SpmTokenizerOptions options;
  options.source = path.string();
  options.add_bos = settings.add_bos_token.value_or(true);
  options.add_eos = settings.add_eos_token.value_or(false);
  if (settings.bos_token) options.bos_token = *settings.bos_token;
  if (settings.eos_token) options.eos_token = *settings.eos_token;
  LATHE_ASSIGN_OR_RETURN(auto tokenizer, SpmTokenizer::create(std::move(model), options));
  return std::shared_ptr<const Tokenizer>(std::move(tokenizer));
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> load_gguf_tokenizer(const GgufTokenizerData& d) {
  const std::string src = kGgufSource;
  if (d.tokens.empty()) return corrupt_file(src + ": tokenizer.ggml.tokens is missing or empty");
  if (d.tokens.size() > INT32_MAX) return corrupt_file(src + ": too many tokens");
  const auto n = static_cast<int64_t>(d.tokens.size());
  if (!d.token_types.empty() && d.token_types.size() != d.tokens.size()) {
    return corrupt_file(src + ": tokenizer.ggml.token_type has " +
                        std::to_string(d.token_types.size()) + " entries for " + std::to_string(n) +
                        " tokens");
  }
  const std::pair<const char*, int32_t> ids[] = {{"bos_token_id", d.bos_id},
                                                 {"eos_token_id", d.eos_id},
                                                 {"unknown_token_id", d.unk_id},
                                                 {"padding_token_id", d.pad_id}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= n) {
      return corrupt_file(src + ": tokenizer.ggml." + name + " is " + std::to_string(id) +
                          ", outside the vocabulary of " + std::to_string(n) + " tokens");
    }
  }
  if (d.model == "gpt2") return load_gguf_bpe(d);
  if (d.model == "llama") return load_gguf_spm(d);
  if (d.model.empty()) return corrupt_file(src + ": tokenizer.ggml.model is missing");
  return unsupported(
      src + ": tokenizer.ggml.model '" + d.model +
      "' is not supported (Lathe reads 'gpt2' byte-level BPE and 'llama' SentencePiece "
      "vocabularies)");
}

Result<HfSpecialTokenSettings> read_hf_special_token_settings(const std::string& folder) {
  HfSpecialTokenSettings settings;
  std::error_code ec;
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    const fs::path p = fs::path(folder) / name;
    if (!fs::exists(p, ec)) continue;
    LATHE_ASSIGN_OR_RETURN(std::string text, read_file(p.string()));
    LATHE_RETURN_IF_ERROR(parse_hf_special_token_settings(text, p.string(), settings));
  }
  return settings;
}

Result<std::shared_ptr<const Tokenizer>> load_hf_tokenizer(const std::string& folder) {
  const fs::path dir(folder);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found(folder + ": not a folder");

  LATHE_ASSIGN_OR_RETURN(HfSpecialTokenSettings settings, read_hf_special_token_settings(folder));

  const fs::path json_path = dir / "tokenizer.json";
  const fs::path model_path = dir / "tokenizer.model";
  const bool has_model = fs::exists(model_path, ec);
  if (fs::exists(json_path, ec)) {
    LATHE_ASSIGN_OR_RETURN(std::string text, read_file(json_path.string()));
    std::string kind_name;
    BpeTokenizerConfig config;
    LATHE_ASSIGN_OR_RETURN(HfTokenizerJsonKind kind,
                           parse_hf_tokenizer_json(text, json_path.string(), &config, &kind_name));
    if (kind == HfTokenizerJsonKind::kByteLevelBpe)
      return load_hf_bpe(std::move(config), json_path, settings);
    if (!has_model) {
      return unsupported(json_path.string() + ": a " + kind_name +
                         " tokenizer is not supported without its tokenizer.model (Lathe reads "
                         "byte-level BPE tokenizer.json files and SentencePiece models)");
    }
  }
  if (has_model) return load_hf_spm(model_path, settings);
  return not_found(folder + ": no tokenizer.json or tokenizer.model");
}

}  // namespace lathe
