#include "engine/model/model_weights.h"

#include <algorithm>
#include <set>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/dequant.h"
#include "engine/model/tensor_names.h"

namespace lathe {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool same_shape(const TensorView& v, const std::vector<int64_t>& shape) {
  if (v.ndim != static_cast<int>(shape.size())) return false;
  for (int i = 0; i < v.ndim; ++i)
    if (v.shape[i] != shape[static_cast<size_t>(i)]) return false;
  return true;
}

}  // namespace

std::string supported_weight_types() {
  std::string s;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K})
    if (can_dequantize(t)) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

Status collect_weights(const ModelConfig& config, const std::map<std::string, FileTensor>& found,
                       WeightStore* store, bool quantized_checkpoint) {
  const std::vector<ExpectedTensor> expected = expected_tensors(config);
  std::set<std::string> wanted;
  for (const ExpectedTensor& e : expected) wanted.insert(e.name);

  for (const ExpectedTensor& e : expected) {
    const bool projection = e.shape.size() == 2 && e.name != "token_embd";
    if (quantized_checkpoint && projection) {
      // Quantized parts: every "<name>.<part>" the loader found.
      bool has_parts = false;
      for (auto p = found.lower_bound(e.name + "."); p != found.end(); ++p) {
        if (!starts_with(p->first, e.name + ".")) break;
        store->add(p->first, p->second.view);
        wanted.insert(p->first);
        has_parts = true;
      }
      auto plain = found.find(e.name);
      if (plain == found.end()) {
        if (has_parts) continue;
        return not_found("tensor '" + e.name + "' is missing from the model files: neither '" +
                         hf_name_from_canonical(e.name) + "' nor quantized parts of it");
      }
      const FileTensor& t = plain->second;
      if (!same_shape(t.view, e.shape))
        return corrupt_file("tensor '" + e.name + "' ('" + t.file_name + "' in " + t.file +
                            ") has shape " + t.view.shape_string() + ", expected " +
                            shape_string(e.shape) + " from the model config");
      store->add(e.name, t.view);  // its dtype is checked by the weight scheme
      continue;
    }
    auto it = found.find(e.name);
    if (it == found.end()) {
      std::string hint;
      if (e.name == "output")
        hint = " (the config says the output layer is not tied to the embedding)";
      return not_found("tensor '" + e.name + "' is missing from the model files" + hint);
    }
    const FileTensor& t = it->second;
    const std::string label = "tensor '" + e.name + "' ('" + t.file_name + "' in " + t.file + ")";
    if (!same_shape(t.view, e.shape))
      return corrupt_file(label + " has shape " + t.view.shape_string() + ", expected " +
                          shape_string(e.shape) + " from the model config");
    const DTypeInfo& info = dtype_info(t.view.dtype);
    if (e.float_only && !(t.view.dtype == DType::kF32 || t.view.dtype == DType::kF16 ||
                          t.view.dtype == DType::kBF16))
      return unsupported(label + " is stored as " + std::string(info.name) +
                         "; norms and biases must be f32, f16 or bf16");
    if (!can_dequantize(t.view.dtype))
      return unsupported(
          label + " is stored as " + std::string(info.name) +
          ", which Lathe cannot compute with; supported: " + supported_weight_types() +
          " (and the quantized Hugging Face formats gptq, awq, compressed-tensors "
          "and fp8 with their quantization_config)");
    store->add(e.name, t.view);
  }
  for (const auto& [name, t] : found)
    if (!wanted.count(name))
      log_debug("ignoring tensor '" + t.file_name + "' in " + t.file +
                ": this model configuration does not use it");
  return Status();
}

std::vector<std::pair<std::string, int64_t>> group_bytes(const ModelConfig& config,
                                                         const WeightStore& store) {
  (void)config;
  std::vector<std::pair<std::string, int64_t>> out;
  for (const char* group : {"embedding", "attention", "mlp", "norms", "output"}) {
    int64_t b = 0;
    for (const auto& [name, t] : store.tensors())
      if (std::string(tensor_group(name)) == group) b += t.nbytes();
    if (b > 0) out.emplace_back(group, b);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> summarize_dtypes(const ModelConfig& config,
                                                                  const WeightStore& store) {
  static const char* kGroups[] = {"embedding", "attention", "mlp", "norms", "output"};
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* group : kGroups) {
    if (std::string(group) == "output" && config.tie_word_embeddings) {
      out.emplace_back(group, "tied");
      continue;
    }
    std::vector<std::pair<int64_t, DType>> bytes;  // bytes per dtype in this group
    for (const auto& [name, t] : store.tensors()) {
      if (std::string(tensor_group(name)) != group) continue;
      const DType dtype = t.dtype;  // (clang 14 cannot capture a structured binding)
      auto it = std::find_if(bytes.begin(), bytes.end(),
                             [&](const auto& p) { return p.second == dtype; });
      if (it == bytes.end())
        bytes.emplace_back(t.nbytes(), t.dtype);
      else
        it->first += t.nbytes();
    }
    if (bytes.empty()) continue;
    std::stable_sort(bytes.begin(), bytes.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string s;
    for (const auto& [n, dt] : bytes) {
      if (!s.empty()) s += '+';
      s += dtype_name(dt);
    }
    out.emplace_back(group, s);
  }
  return out;
}

DType dominant_layer_dtype(const WeightStore& store, DType fallback) {
  std::vector<std::pair<int64_t, DType>> bytes;
  for (const auto& [name, t] : store.tensors()) {
    if (t.ndim != 2 || !starts_with(name, "blk.")) continue;
    const DType dtype = t.dtype;  // (clang 14 cannot capture a structured binding)
    auto it =
        std::find_if(bytes.begin(), bytes.end(), [&](const auto& p) { return p.second == dtype; });
    if (it == bytes.end())
      bytes.emplace_back(t.nbytes(), t.dtype);
    else
      it->first += t.nbytes();
  }
  DType best = fallback;
  int64_t most = -1;
  for (const auto& [n, dt] : bytes)
    if (n > most) {
      most = n;
      best = dt;
    }
  return best;
}

}  // namespace lathe
