#include "engine/quant/gguf_tensor_plan.h"

#include <algorithm>
#include <charconv>

#include "engine/core/strings.h"
#include "engine/model/tensor_names.h"

namespace lathe {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

// The block index of "blk.N...." names, -1 for others.
int64_t layer_of(const std::string& name) {
  if (!starts_with(name, "blk.")) return -1;
  int64_t layer = -1;
  const char* b = name.data() + 4;
  std::from_chars(b, name.data() + name.size(), layer);
  return layer;
}

}  // namespace

std::vector<GgufPlannedTensor> plan_gguf_tensors(
    const ModelConfig& c, GgufFileType file_type,
    const std::function<std::vector<int64_t>(const std::string&)>& shape_of,
    int64_t rope_freqs_len) {
  std::vector<GgufPlannedTensor> out;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    GgufPlannedTensor p;
    p.canonical = t.name;
    p.spec.name = gguf_name_from_canonical(t.name);
    p.layer = layer_of(p.spec.name);
    p.spec.shape = shape_of(t.name);
    out.push_back(std::move(p));
  }
  if (rope_freqs_len > 0) {
    GgufPlannedTensor p;
    p.canonical = kGgufRopeFreqs;
    p.spec.name = "rope_freqs.weight";
    p.spec.shape = {rope_freqs_len};
    out.push_back(std::move(p));
  }
  // llama.cpp's order (weight_name_comparer): by block (globals first), then by name.
  std::stable_sort(out.begin(), out.end(),
                   [](const GgufPlannedTensor& a, const GgufPlannedTensor& b) {
                     return a.layer != b.layer ? a.layer < b.layer : a.spec.name < b.spec.name;
                   });
  for (GgufPlannedTensor& p : out) {
    GgufTensorQuery q;
    q.name = p.spec.name;
    q.n_dims = static_cast<int>(p.spec.shape.size());
    q.row_length = p.spec.shape.empty() ? 0 : p.spec.shape.back();
    q.layer = p.layer;
    q.num_layers = c.num_layers;
    q.tied_embeddings = c.tie_word_embeddings;
    q.is_70b = c.num_layers == 80 && c.num_kv_heads < c.num_heads;
    p.spec.dtype = gguf_tensor_type(file_type, q).value_or(DType::kF32);
  }
  return out;
}

void gguf_set_quantization_keys(GgufMetadata& m, GgufFileType file_type) {
  gguf_set(m, "general.quantization_version", gguf_u32(kQuantizationVersion));
  gguf_set(m, "general.file_type", gguf_u32(static_cast<uint32_t>(file_type)));
}

}  // namespace lathe
