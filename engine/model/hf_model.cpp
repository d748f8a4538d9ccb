#include "engine/model/hf_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/log.h"
#include "engine/core/read_file.h"
#include "engine/core/strings.h"
#include "engine/model/checkpoint_quant.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config_parse.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors_file.h"
#include "engine/model/tensor_names.h"
#include "engine/model/weight_scheme.h"
#include "engine/tokenizer/tokenizer_loader.h"

namespace lathe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Parses a JSON file that may be absent: null json when it does not exist.
Result<json> read_optional_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return json();
  LATHE_ASSIGN_OR_RETURN(std::string text, read_file(p.string()));
  try {
    json j = json::parse(text);
    if (!j.is_object()) return corrupt_file(p.string() + ": expected a JSON object");
    return j;
  } catch (const json::exception& e) {
    return corrupt_file(p.string() + ": not valid JSON: " + e.what());
  }
}

// Appends the ids of an "eos_token_id" value (int or list of ints); others are ignored.
void add_eos_ids(const json& j, std::vector<TokenId>* ids) {
  auto add = [&](const json& v) {
    if (!v.is_number_integer()) return;
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<TokenId>::max()) return;
    if (std::find(ids->begin(), ids->end(), static_cast<TokenId>(id)) == ids->end())
      ids->push_back(static_cast<TokenId>(id));
  };
  const auto it = j.find("eos_token_id");
  if (it == j.end()) return;
  if (it->is_array()) {
    for (const json& v : *it) add(v);
  } else {
    add(*it);
  }
}

}  // namespace

bool hf_folder_has_tokenizer(const std::string& folder) {
  std::error_code ec;
  return fs::exists(fs::path(folder) / "tokenizer.json", ec) ||
         fs::exists(fs::path(folder) / "tokenizer.model", ec);
}

Result<std::string> read_hf_chat_template(const std::string& folder) {
  const fs::path dir(folder);
  std::error_code ec;
  if (fs::exists(dir / "chat_template.jinja", ec))
    return read_file((dir / "chat_template.jinja").string());
  const fs::path cfg_path = dir / "tokenizer_config.json";
  LATHE_ASSIGN_OR_RETURN(json cfg, read_optional_json(cfg_path));
  if (cfg.is_null()) return std::string();
  const auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string names;
    for (const json& entry : *it) {
      if (!entry.is_object()) continue;
      const auto name = entry.find("name");
      const auto tmpl = entry.find("template");
      if (name == entry.end() || !name->is_string() || tmpl == entry.end() || !tmpl->is_string())
        continue;
      if (name->get<std::string>() == "default") return tmpl->get<std::string>();
      if (!names.empty()) names += ", ";
      names += name->get<std::string>();
    }
    log_warning(cfg_path.string() + ": chat_template lists no \"default\" template (has: " + names +
                "); the model has no chat template");
    return std::string();
  }
  return corrupt_file(cfg_path.string() +
                      ": chat_template must be a string or a list of {name, template}");
}

Result<GenerationDefaults> read_hf_generation_defaults(const std::string& folder) {
  const fs::path dir(folder);
  GenerationDefaults gen;
  LATHE_ASSIGN_OR_RETURN(json g, read_optional_json(dir / "generation_config.json"));
  if (!g.is_null()) {
    add_eos_ids(g, &gen.eos_token_ids);
    auto num = [&](const char* key, float* out) {
      const auto it = g.find(key);
      if (it != g.end() && it->is_number()) *out = it->get<float>();
    };
    num("temperature", &gen.temperature);
    num("top_p", &gen.top_p);
    num("repetition_penalty", &gen.repetition_penalty);
    const auto k = g.find("top_k");
    if (k != g.end() && k->is_number_integer() && k->get<int64_t>() >= 0 &&
        k->get<int64_t>() <= std::numeric_limits<int>::max())
      gen.top_k = k->get<int>();
  }
  LATHE_ASSIGN_OR_RETURN(json c, read_optional_json(dir / "config.json"));
  if (!c.is_null()) add_eos_ids(c, &gen.eos_token_ids);
  return gen;
}

Result<LoadedModel> load_hf_model(const std::string& folder, const LoadOptions& options) {
  const fs::path dir(folder);
  std::error_code ec;
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec))
    return not_found(
        folder +
        ": no config.json; a Hugging Face model folder holds config.json, *.safetensors "
        "and tokenizer files");
  LoadedModel m;
  m.path = folder;
  m.format =
      options.load_format == LoadFormat::kDummy ? ModelFormat::kDummy : ModelFormat::kHfFolder;
  LATHE_ASSIGN_OR_RETURN(m.config, load_hf_config(config_path.string()));
  {
    const fs::path canonical = fs::weakly_canonical(dir, ec);
    const std::string base = (ec ? dir : canonical).filename().string();
    if (!base.empty()) m.config.name = base;
  }

  if (m.format == ModelFormat::kHfFolder) {
    // A quantized checkpoint names its method (gptq, awq, compressed-tensors, fp8); an unknown one
    // is refused here, naming it and the supported ones.
    LATHE_ASSIGN_OR_RETURN(m.quantization, read_checkpoint_quant(folder));
    LATHE_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::open_folder(folder));
    std::map<std::string, FileTensor> found;
    for (const auto& [name, entry] : ckpt.tensors()) {
      const std::string canonical = canonical_name_from_hf(name);
      if (canonical.empty()) {
        log_debug("ignoring tensor '" + name + "' in " + entry.file->path() +
                  ": Lathe does not use it");
        continue;
      }
      if (canonical == "output" && m.config.tie_word_embeddings) {
        log_debug("ignoring '" + name + "' in " + entry.file->path() +
                  ": the config ties it to the embedding");
        continue;
      }
      if (found.count(canonical))
        return corrupt_file(folder + ": tensors '" + found[canonical].file_name + "' and '" + name +
                            "' are the same weight");
      LATHE_ASSIGN_OR_RETURN(TensorView view, entry.tensor->view(entry.file->path()));
      // The format does not align tensor data: weights are read in place as their element type,
      // so a tensor at an offset that is not a multiple of its element size is copied (rare: the
      // safetensors writers pad the header to 8 bytes and most checkpoints keep the offsets even).
      const DTypeInfo& info = dtype_info(view.dtype);
      const int64_t align = info.block_size == 1 ? info.block_bytes : 1;
      if (align > 1 &&
          reinterpret_cast<uintptr_t>(view.data) % static_cast<uintptr_t>(align) != 0) {
        const uint8_t* src = static_cast<const uint8_t*>(view.data);
        view.data = m.weights.own(std::vector<uint8_t>(src, src + view.nbytes()));
      }
      found[canonical] = FileTensor{view, name, entry.file->path()};
    }
    const bool quantized = m.quantization.quantized();
    LATHE_RETURN_IF_ERROR(
        collect_weights(m.config, found, &m.weights, quantized).with_context(folder));
    for (const auto& f : ckpt.files()) m.weights.keep_alive(f->mapped_file());
    m.file_bytes = ckpt.total_file_bytes();
    m.group_bytes = group_bytes(m.config, m.weights);
    if (quantized) {
      // Every projection through the checkpoint's scheme now, so a checkpoint that disagrees with
      // its config fails at load (naming the tensor), and the summary names the formats.
      // config.weight_dtype stays the config's torch_dtype (the unquantized tensors' type).
      Result<ModelWeights> bound = bind_model_weights(m);
      if (!bound.is_ok()) return bound.status().with_context(folder);
      m.dtype_summary = summarize_formats(m.config, *bound);
      log_info(folder + ": " + bound->scheme->description());
    } else {
      m.config.weight_dtype = dominant_layer_dtype(m.weights, m.config.weight_dtype);
      m.dtype_summary = summarize_dtypes(m.config, m.weights);
    }
  }

  const bool has_tokenizer = hf_folder_has_tokenizer(folder);
  if (options.load_tokenizer && !has_tokenizer && m.format != ModelFormat::kDummy)
    return not_found(folder +
                     ": no tokenizer: expected tokenizer.json (byte-level BPE) or tokenizer.model "
                     "(SentencePiece) next to config.json; copy them from the original model");
  if (options.load_tokenizer && has_tokenizer) {
    LATHE_ASSIGN_OR_RETURN(m.tokenizer, load_hf_tokenizer(folder));
  }

  if (!options.chat_template_override.empty()) {
    m.chat_template = options.chat_template_override;
  } else {
    LATHE_ASSIGN_OR_RETURN(m.chat_template, read_hf_chat_template(folder));
  }

  LATHE_ASSIGN_OR_RETURN(m.generation, read_hf_generation_defaults(folder));
  if (m.tokenizer && m.tokenizer->eos_id() >= 0 &&
      std::find(m.generation.eos_token_ids.begin(), m.generation.eos_token_ids.end(),
                m.tokenizer->eos_id()) == m.generation.eos_token_ids.end())
    m.generation.eos_token_ids.push_back(m.tokenizer->eos_id());
  return m;
}

}  // namespace lathe
