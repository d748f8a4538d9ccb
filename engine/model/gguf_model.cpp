#include "engine/model/gguf_model.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/model_config_parse.h"
#include "engine/model/model_weights.h"
#include "engine/model/tensor_names.h"

namespace lathe {

namespace {

// An optional token id key: -1 when absent. Outside [0, vocab): an error when `strict`, else -1
// with a warning (some converters write padding ids such as 0xffffffff).
Result<int32_t> read_token_id(const GgufFile& g, const std::string& key, size_t vocab,
                              bool strict = true) {
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> v, g.get_int(key));
  if (!v) return -1;
  const bool in_range = *v >= 0 && (vocab == 0 || static_cast<uint64_t>(*v) < vocab);
  if (!in_range && !strict) {
    log_warning(strformat("%s: ignoring %s = %lld, outside the vocabulary", g.path().c_str(),
                          key.c_str(), static_cast<long long>(*v)));
    return -1;
  }
  if (!in_range)
    return corrupt_file(strformat("%s: %s is %lld, outside the vocabulary of %zu tokens",
                                  g.path().c_str(), key.c_str(), static_cast<long long>(*v),
                                  vocab));
  return static_cast<int32_t>(*v);
}

Result<int32_t> read_flag(const GgufFile& g, const std::string& key) {
  LATHE_ASSIGN_OR_RETURN(std::optional<bool> v, g.get_bool(key));
  return v ? static_cast<int32_t>(*v) : -1;
}

}  // namespace

Result<GgufTokenizerData> read_gguf_tokenizer_data(const GgufFile& g) {
  GgufTokenizerData d;
  LATHE_ASSIGN_OR_RETURN(std::optional<std::string> model, g.get_string("tokenizer.ggml.model"));
  if (!model)
    return not_found(g.path() +
                     ": the file has no tokenizer (no tokenizer.ggml.model metadata); use a GGUF "
                     "converted with its vocabulary");
  d.model = *model;
  LATHE_ASSIGN_OR_RETURN(std::optional<std::string> pre, g.get_string("tokenizer.ggml.pre"));
  d.pre = pre.value_or("default");
  LATHE_ASSIGN_OR_RETURN(d.tokens, g.get_string_array("tokenizer.ggml.tokens"));
  if (d.tokens.empty())
    return corrupt_file(g.path() + ": tokenizer.ggml.tokens is missing or empty");
  const size_t n = d.tokens.size();
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return corrupt_file(g.path() +
                        ": tokenizer.ggml.tokens has more entries than token ids can address");

  LATHE_ASSIGN_OR_RETURN(std::vector<double> scores, g.get_float_array("tokenizer.ggml.scores"));
  if (!scores.empty() && scores.size() != n)
    return corrupt_file(strformat("%s: tokenizer.ggml.scores has %zu entries for %zu tokens",
                                  g.path().c_str(), scores.size(), n));
  d.scores.assign(scores.begin(), scores.end());
  LATHE_ASSIGN_OR_RETURN(std::vector<int64_t> types, g.get_int_array("tokenizer.ggml.token_type"));
  if (!types.empty() && types.size() != n)
    return corrupt_file(strformat("%s: tokenizer.ggml.token_type has %zu entries for %zu tokens",
                                  g.path().c_str(), types.size(), n));
  d.token_types.reserve(types.size());
  for (int64_t t : types) d.token_types.push_back(static_cast<int32_t>(t));
  LATHE_ASSIGN_OR_RETURN(d.merges, g.get_string_array("tokenizer.ggml.merges"));

  LATHE_ASSIGN_OR_RETURN(d.bos_id, read_token_id(g, "tokenizer.ggml.bos_token_id", n));
  LATHE_ASSIGN_OR_RETURN(d.eos_id, read_token_id(g, "tokenizer.ggml.eos_token_id", n));
  LATHE_ASSIGN_OR_RETURN(d.unk_id, read_token_id(g, "tokenizer.ggml.unknown_token_id", n, false));
  LATHE_ASSIGN_OR_RETURN(d.pad_id, read_token_id(g, "tokenizer.ggml.padding_token_id", n, false));
  LATHE_ASSIGN_OR_RETURN(d.add_bos, read_flag(g, "tokenizer.ggml.add_bos_token"));
  LATHE_ASSIGN_OR_RETURN(d.add_eos, read_flag(g, "tokenizer.ggml.add_eos_token"));
  LATHE_ASSIGN_OR_RETURN(d.add_space_prefix, read_flag(g, "tokenizer.ggml.add_space_prefix"));
  return d;
}

Result<GenerationDefaults> read_gguf_generation_defaults(const GgufFile& g) {
  GenerationDefaults gen;
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  const size_t vocab = tokens != nullptr ? static_cast<size_t>(tokens->array_size()) : 0;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    LATHE_ASSIGN_OR_RETURN(int32_t id, read_token_id(g, key, vocab));
    if (id >= 0 && std::find(gen.eos_token_ids.begin(), gen.eos_token_ids.end(), id) ==
                       gen.eos_token_ids.end())
      gen.eos_token_ids.push_back(id);
  }
  LATHE_ASSIGN_OR_RETURN(std::optional<double> temp, g.get_float("general.sampling.temp"));
  LATHE_ASSIGN_OR_RETURN(std::optional<double> top_p, g.get_float("general.sampling.top_p"));
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, g.get_int("general.sampling.top_k"));
  if (temp) gen.temperature = static_cast<float>(*temp);
  if (top_p) gen.top_p = static_cast<float>(*top_p);
  if (top_k && *top_k >= 0 && *top_k <= std::numeric_limits<int>::max())
    gen.top_k = static_cast<int>(*top_k);
  return gen;
}

Result<LoadedModel> load_gguf_model(const std::string& path, const LoadOptions& options) {
  LATHE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> g, GgufFile::open(path));
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> splits, g->get_int("split.count"));
  if (splits && *splits > 1)
    return unsupported(
        path +
        strformat(": this is one of %lld parts of a split GGUF; merge the parts into one file "
                  "first (llama-gguf-split --merge FIRST_PART OUT.gguf)",
                  static_cast<long long>(*splits)));
  LoadedModel m;
  m.path = path;
  m.format = options.load_format == LoadFormat::kDummy ? ModelFormat::kDummy : ModelFormat::kGguf;
  LATHE_ASSIGN_OR_RETURN(m.config, config_from_gguf(*g));
  if (m.config.name.empty()) m.config.name = std::filesystem::path(path).stem().string();
  m.file_bytes = static_cast<int64_t>(g->file_size());

  if (m.format == ModelFormat::kGguf) {
    std::map<std::string, FileTensor> found;
    for (const GgufTensorInfo& t : g->tensors()) {
      const std::string canonical = canonical_name_from_gguf(t.name);
      if (canonical.empty()) {
        if (t.name != "rope_freqs.weight")  // read into the config
          log_debug("ignoring tensor '" + t.name + "' in " + path + ": Lathe does not use it");
        continue;
      }
      if (found.count(canonical))
        return corrupt_file(path + ": tensors '" + found[canonical].file_name + "' and '" + t.name +
                            "' are the same weight");
      found[canonical] = FileTensor{t.view(), t.name, path};
    }
    LATHE_RETURN_IF_ERROR(collect_weights(m.config, found, &m.weights).with_context(path));
    m.weights.keep_alive(g->mapped_file());
    m.dtype_summary = summarize_dtypes(m.config, m.weights);
    m.group_bytes = group_bytes(m.config, m.weights);
  }

  if (options.load_tokenizer) {
    LATHE_ASSIGN_OR_RETURN(GgufTokenizerData data, read_gguf_tokenizer_data(*g));
    auto tok = load_gguf_tokenizer(data);
    if (!tok.is_ok()) return tok.status().with_context(path);
    m.tokenizer = std::move(tok).value();
  }

  if (!options.chat_template_override.empty()) {
    m.chat_template = options.chat_template_override;
  } else {
    LATHE_ASSIGN_OR_RETURN(std::optional<std::string> tmpl,
                           g->get_string("tokenizer.chat_template"));
    m.chat_template = tmpl.value_or("");
  }

  LATHE_ASSIGN_OR_RETURN(m.generation, read_gguf_generation_defaults(*g));
  if (m.tokenizer && m.tokenizer->eos_id() >= 0 &&
      std::find(m.generation.eos_token_ids.begin(), m.generation.eos_token_ids.end(),
                m.tokenizer->eos_id()) == m.generation.eos_token_ids.end())
    m.generation.eos_token_ids.push_back(m.tokenizer->eos_id());
  return m;
}

}  // namespace lathe
