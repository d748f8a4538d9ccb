#include "engine/tokenizer/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "engine/core/log.h"

namespace lathe {

namespace {

using json = nlohmann::json;

Result<json> parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return corrupt_file(source + ": not valid JSON (" + e.what() + ")");
  }
}

// Thrown by the parse callback when tokenizer.json lists more than a limit allows.
struct TooManyEntries {
  std::string message;
};

// tokenizer.json, refused while it is being read once it lists more vocabulary entries, merges or
// added tokens than kMaxTokenizerTokens / kMaxTokenizerMerges, so a hostile file costs a bounded
// amount of time and memory instead of building a document of gigabytes first.
Result<json> parse_tokenizer_json(std::string_view text, const std::string& source) {
  enum class Counting { kNone, kVocab, kMerges, kAddedTokens };
  Counting counting = Counting::kNone;
  std::string key1, key2;  // the last object keys seen at depths 1 and 2
  int64_t count = 0;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::key && depth <= 2) {
      (depth == 1 ? key1 : key2) = parsed.get<std::string>();
      return true;
    }
    if ((event == E::object_start || event == E::array_start) && counting == Counting::kNone) {
      if (depth == 2 && key2 == "vocab" && event == E::object_start) counting = Counting::kVocab;
      if (depth == 2 && key2 == "merges" && event == E::array_start) counting = Counting::kMerges;
      if (depth == 1 && key1 == "added_tokens" && event == E::array_start)
        counting = Counting::kAddedTokens;
      if (counting != Counting::kNone) {
        count = 0;
        return true;
      }
    }
    if ((event == E::object_end || event == E::array_end) &&
        depth == (counting == Counting::kAddedTokens ? 1 : 2)) {
      counting = Counting::kNone;
      return true;
    }
    const int element_depth = counting == Counting::kAddedTokens ? 2 : 3;
    const bool element =
        depth == element_depth &&
        (counting == Counting::kVocab
             ? event == E::key
             : event == E::value || event == E::array_start || event == E::object_start);
    if (counting != Counting::kNone && element) {
      ++count;
      const bool merges = counting == Counting::kMerges;
      const int64_t limit = merges ? kMaxTokenizerMerges : kMaxTokenizerTokens;
      if (count > limit) {
        const char* what = merges                         ? "merges"
                           : counting == Counting::kVocab ? "vocabulary entries"
                                                          : "added tokens";
        throw TooManyEntries{source + ": more than " + std::to_string(limit) + " " + what +
                             "; Lathe reads tokenizers of up to " +
                             std::to_string(kMaxTokenizerTokens) + " tokens and " +
                             std::to_string(kMaxTokenizerMerges) +
                             " merges (is this file damaged?)"};
      }
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    return corrupt_file(source + ": not valid JSON (" + e.what() + ")");
  } catch (const TooManyEntries& e) {
    return corrupt_file(e.message);
  }
}

bool get_bool(const json& obj, const char* key, bool fallback) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string type_of(const json& component) {
  const auto it = component.find("type");
  return it != component.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool has_byte_level(const json& pre) {
  if (!pre.is_object()) return false;
  const std::string type = type_of(pre);
  if (type == "ByteLevel") return true;
  if (type == "Sequence") {
    const auto it = pre.find("pretokenizers");
    if (it == pre.end() || !it->is_array()) return false;
    for (const json& p : *it) {
      if (has_byte_level(p)) return true;
    }
  }
  return false;
}

Status parse_normalizer(const json& n, const std::string& source, TextNormalization& out) {
  if (n.is_null()) return Status::ok();
  if (!n.is_object()) return corrupt_file(source + ": \"normalizer\" must be an object or null");
  const std::string type = type_of(n);
  if (type == "NFC") {
    out = TextNormalization::kNfc;
    return Status::ok();
  }
  if (type == "Sequence") {
    const auto it = n.find("normalizers");
    if (it == n.end() || !it->is_array()) {
      return corrupt_file(source + ": normalizer Sequence has no \"normalizers\" list");
    }
    for (const json& inner : *it) LATHE_RETURN_IF_ERROR(parse_normalizer(inner, source, out));
    return Status::ok();
  }
  return unsupported(source + ": normalizer '" + type +
                     "' is not supported (byte-level BPE models use none or NFC)");
}

Status parse_pre_tokenizer(const json& p, const std::string& source,
                           std::vector<PreTokenizerStep>& steps) {
  if (!p.is_object()) return corrupt_file(source + ": a pre-tokenizer must be an object");
  const std::string type = type_of(p);
  PreTokenizerStep step;
  if (type == "Sequence") {
    const auto it = p.find("pretokenizers");
    if (it == p.end() || !it->is_array()) {
      return corrupt_file(source + ": pre-tokenizer Sequence has no \"pretokenizers\" list");
    }
    for (const json& inner : *it) LATHE_RETURN_IF_ERROR(parse_pre_tokenizer(inner, source, steps));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = get_bool(p, "add_prefix_space", true);
    step.use_regex = get_bool(p, "use_regex", true);
  } else if (type == "Digits") {
    step.kind = PreTokenizerStep::Kind::kDigits;
    step.individual_digits = get_bool(p, "individual_digits", false);
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    const auto pattern = p.find("pattern");
    if (pattern == p.end() || !pattern->is_object() || !pattern->contains("Regex") ||
        !(*pattern)["Regex"].is_string()) {
      return unsupported(source + ": Split pre-tokenizer without a Regex pattern is not supported");
    }
    const std::string regex = (*pattern)["Regex"].get<std::string>();
    const auto rule = split_rule_from_pattern(regex);
    if (!rule) {
      return unsupported(source + ": Split pattern " + json(regex).dump() +
                         " is not one Lathe knows (GPT-2, Llama 3, Qwen2)");
    }
    step.rule = *rule;
    const auto behavior = p.find("behavior");
    if (behavior != p.end() &&
        (!behavior->is_string() || behavior->get<std::string>() != "Isolated")) {
      return unsupported(source + ": Split behavior " + behavior->dump() +
                         " is not supported (only \"Isolated\")");
    }
    if (get_bool(p, "invert", false)) {
      return unsupported(source + ": Split with invert: true is not supported");
    }
  } else {
    return unsupported(source + ": pre-tokenizer '" + type +
                       "' is not supported in a byte-level BPE");
  }
  steps.push_back(step);
  return Status::ok();
}

// TemplateProcessing's "single" template: the special tokens before and after $A.
Status parse_template(const json& post, const std::string& source, BpeTokenizerConfig& config,
                      const std::unordered_map<std::string, TokenId>& ids) {
  const auto single = post.find("single");
  if (single == post.end() || !single->is_array()) {
    return corrupt_file(source + ": TemplateProcessing has no \"single\" template");
  }
  const json specials = post.value("special_tokens", json::object());
  std::vector<TokenId> before, after;
  bool seen_sequence = false;
  for (const json& item : *single) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id")) {
      return corrupt_file(source + ": TemplateProcessing item " + item.dump() +
                          " is not understood");
    }
    const std::string name = item["SpecialToken"]["id"].get<std::string>();
    TokenId id = -1;
    if (specials.contains(name) && specials[name].contains("ids") &&
        specials[name]["ids"].is_array() && specials[name]["ids"].size() == 1) {
      id = specials[name]["ids"][0].get<TokenId>();
    } else if (const auto it = ids.find(name); it != ids.end()) {
      id = it->second;
    }
    if (id < 0) {
      return corrupt_file(source + ": TemplateProcessing names special token '" + name +
                          "', which has no id");
    }
    (seen_sequence ? after : before).push_back(id);
  }
  if (before.size() > 1 || after.size() > 1) {
    return unsupported(
        source + ": a TemplateProcessing that adds more than one token on a side is not supported");
  }
  if (!before.empty()) {
    config.bos_id = before[0];
    config.add_bos = true;
  }
  if (!after.empty()) {
    config.eos_id = after[0];
    config.add_eos = true;
  }
  return Status::ok();
}

Status parse_post_processor(const json& post, const std::string& source, BpeTokenizerConfig& config,
                            const std::unordered_map<std::string, TokenId>& ids) {
  if (post.is_null()) return Status::ok();
  const std::string type = type_of(post);
  if (type == "TemplateProcessing") return parse_template(post, source, config, ids);
  if (type == "Sequence") {
    const auto it = post.find("processors");
    if (it == post.end() || !it->is_array()) return Status::ok();
    for (const json& p : *it) LATHE_RETURN_IF_ERROR(parse_post_processor(p, source, config, ids));
    return Status::ok();
  }
  if (type != "ByteLevel") {
    log_warning(source + ": post-processor '" + type + "' is ignored (no BOS/EOS taken from it)");
  }
  return Status::ok();
}

Status parse_merge(const json& m, size_t rank, const std::string& source,
                   std::pair<std::string, std::string>& out) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= s.size() ||
        s.find(' ', space + 1) != std::string::npos) {
      return corrupt_file(source + ": merge " + std::to_string(rank) + " " + m.dump() +
                          " is not two tokens separated by one space");
    }
    out = {s.substr(0, space), s.substr(space + 1)};
    return Status::ok();
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    out = {m[0].get<std::string>(), m[1].get<std::string>()};
    return Status::ok();
  }
  return corrupt_file(source + ": merge " + std::to_string(rank) + " " + m.dump() +
                      " is neither \"a b\" nor [\"a\", \"b\"]");
}

Result<BpeTokenizerConfig> parse_document(const json& doc, const std::string& source) {
  BpeTokenizerConfig config;
  config.source = source;
  if (!doc.is_object()) return corrupt_file(source + ": the top level must be a JSON object");
  const auto model = doc.find("model");
  if (model == doc.end() || !model->is_object())
    return corrupt_file(source + ": no \"model\" object");
  const std::string model_type = type_of(*model);
  if (!model_type.empty() && model_type != "BPE") {
    return unsupported(source + ": model type '" + model_type + "' is not a byte-level BPE");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model->find(key);
    if (it != model->end() && it->is_string() && !it->get<std::string>().empty()) {
      return unsupported(source + ": BPE with " + key + " is not supported");
    }
  }
  config.ignore_merges = get_bool(*model, "ignore_merges", false);

  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object() || vocab->empty()) {
    return corrupt_file(source + ": model has no \"vocab\" object");
  }
  std::unordered_map<std::string, TokenId> ids;
  for (const auto& [text, id_json] : vocab->items()) {
    // Ids index a table: past kMaxTokenizerTokens one id alone would cost gigabytes.
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() >= kMaxTokenizerTokens) {
      return corrupt_file(source + ": vocab entry " + json(text).dump() + " has id " +
                          id_json.dump() + ", expected an integer in [0, " +
                          std::to_string(kMaxTokenizerTokens) + ")");
    }
    const auto id = id_json.get<TokenId>();
    if (static_cast<size_t>(id) >= config.vocab.size())
      config.vocab.resize(static_cast<size_t>(id) + 1);
    if (!config.vocab[static_cast<size_t>(id)].empty()) {
      return corrupt_file(source + ": vocab entries " + json(config.vocab[id]).dump() + " and " +
                          json(text).dump() + " share id " + std::to_string(id));
    }
    if (text.empty())
      return corrupt_file(source + ": vocab has an empty token (id " + std::to_string(id) + ")");
    config.vocab[static_cast<size_t>(id)] = text;
    ids.emplace(text, id);
  }

  const auto merges = model->find("merges");
  if (merges == model->end() || !merges->is_array()) {
    return corrupt_file(source +
                        ": model has no \"merges\" list; a BPE tokenizer needs its merges");
  }
  config.merges.resize(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    LATHE_RETURN_IF_ERROR(parse_merge((*merges)[i], i, source, config.merges[i]));
  }

  if (const auto added = doc.find("added_tokens"); added != doc.end() && !added->is_null()) {
    if (!added->is_array()) return corrupt_file(source + ": \"added_tokens\" must be a list");
    for (const json& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return corrupt_file(source + ": added token " + a.dump() +
                            " needs an integer id and a content");
      }
      if (a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() >= kMaxTokenizerTokens)
        return corrupt_file(source + ": added token " + a["content"].dump() + " has id " +
                            a["id"].dump() + ", expected an integer in [0, " +
                            std::to_string(kMaxTokenizerTokens) + ")");
      AddedToken t;
      t.id = a["id"].get<TokenId>();
      t.content = a["content"].get<std::string>();
      t.special = get_bool(a, "special", false);
      t.lstrip = get_bool(a, "lstrip", false);
      t.rstrip = get_bool(a, "rstrip", false);
      t.normalized = get_bool(a, "normalized", !t.special);
      t.single_word = get_bool(a, "single_word", false);
      ids[t.content] = t.id;
      config.added_tokens.push_back(std::move(t));
    }
  }

  LATHE_RETURN_IF_ERROR(
      parse_normalizer(doc.value("normalizer", json()), source, config.normalization));
  const json pre = doc.value("pre_tokenizer", json());
  if (!has_byte_level(pre)) {
    return unsupported(
        source + ": the pre-tokenizer has no ByteLevel step, so this is not a byte-level BPE");
  }
  std::vector<PreTokenizerStep> steps;
  LATHE_RETURN_IF_ERROR(parse_pre_tokenizer(pre, source, steps));
  config.pre_tokenizer = PreTokenizer(std::move(steps));
  LATHE_RETURN_IF_ERROR(
      parse_post_processor(doc.value("post_processor", json()), source, config, ids));
  return config;
}

// "<s>" or {"content": "<s>", ...} or null.
std::optional<std::string> token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Result<HfTokenizerJsonKind> parse_hf_tokenizer_json(std::string_view json_text,
                                                    const std::string& source,
                                                    BpeTokenizerConfig* config,
                                                    std::string* kind_name) {
  LATHE_ASSIGN_OR_RETURN(json doc, parse_tokenizer_json(json_text, source));
  try {
    if (!doc.is_object() || !doc.contains("model") || !doc["model"].is_object()) {
      return corrupt_file(source + ": no \"model\" object");
    }
    const std::string type = type_of(doc["model"]);
    const bool byte_level = has_byte_level(doc.value("pre_tokenizer", json()));
    if ((type.empty() || type == "BPE") && byte_level) {
      LATHE_ASSIGN_OR_RETURN(*config, parse_document(doc, source));
      return HfTokenizerJsonKind::kByteLevelBpe;
    }
    if (kind_name != nullptr)
      *kind_name = type.empty() || type == "BPE" ? "BPE without ByteLevel" : type;
    return HfTokenizerJsonKind::kOther;
  } catch (const json::exception& e) {
    return corrupt_file(source + ": " + e.what());
  }
}

Status parse_hf_special_token_settings(std::string_view json_text, const std::string& source,
                                       HfSpecialTokenSettings& settings) {
  LATHE_ASSIGN_OR_RETURN(json doc, parse_json(json_text, source));
  if (!doc.is_object()) return corrupt_file(source + ": the top level must be a JSON object");
  try {
    if (doc.contains("add_bos_token") && doc["add_bos_token"].is_boolean()) {
      settings.add_bos_token = doc["add_bos_token"].get<bool>();
    }
    if (doc.contains("add_eos_token") && doc["add_eos_token"].is_boolean()) {
      settings.add_eos_token = doc["add_eos_token"].get<bool>();
    }
    if (doc.contains("bos_token")) settings.bos_token = token_text(doc["bos_token"]);
    if (doc.contains("eos_token")) settings.eos_token = token_text(doc["eos_token"]);
  } catch (const json::exception& e) {
    return corrupt_file(source + ": " + e.what());
  }
  return Status::ok();
}

}  // namespace lathe
