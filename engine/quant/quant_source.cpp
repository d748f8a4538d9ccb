#include "engine/quant/quant_source.h"

#include <filesystem>

#include "engine/core/strings.h"
#include "engine/model/dequant.h"
#include "engine/model/model_loader.h"
#include "engine/quant/config_export.h"

namespace lathe {
namespace fs = std::filesystem;

Result<QuantSource> QuantSource::open(const std::string& path) {
  QuantSource s;
  s.path_ = path;
  LoadOptions options;
  options.load_tokenizer = false;
  Result<LoadedModel> m = load_model(path, options);
  if (!m.is_ok()) {
    if (m.status().code() == ErrorCode::kUnsupported)
      return unsupported("unsupported source: " + m.status().message() +
                         " (lathe quantize starts from an unquantized F32/F16/BF16 Hugging Face "
                         "checkpoint or a GGUF file of a type Lathe loads)");
    return m.status();
  }
  s.model_ = std::move(m).value();
  s.config_ = s.model_.config;
  if (s.config_.rope_style == RopeStyle::kInterleaved) s.config_.rope_style = RopeStyle::kNeox;
  if (s.model_.format == ModelFormat::kGguf) {
    LATHE_ASSIGN_OR_RETURN(s.gguf_, GgufFile::open(path));
  } else {
    std::error_code ec;
    const fs::path folder =
        fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
    s.hf_folder_ = (folder.empty() ? fs::path(".") : folder).string();
  }
  // The loader refuses what it cannot compute with; this also refuses what it may load one day
  // but quantization cannot start from (e.g. the packed tensors of a quantized HF checkpoint).
  for (const auto& [name, view] : s.model_.weights.tensors()) {
    const bool ok = s.is_gguf() ? can_dequantize(view.dtype)
                                : (view.dtype == DType::kF32 || view.dtype == DType::kF16 ||
                                   view.dtype == DType::kBF16);
    if (!ok)
      return unsupported(strformat(
          "%s: unsupported source dtype: tensor '%s' is stored as %s; lathe quantize reads "
          "F32, F16 and BF16 Hugging Face checkpoints and GGUF files of the types Lathe loads",
          path.c_str(), name.c_str(), std::string(dtype_name(view.dtype)).c_str()));
  }
  return s;
}

std::vector<int64_t> QuantSource::shape(const std::string& canonical) const {
  const TensorView* v = model_.weights.find(canonical);
  if (v == nullptr) return {};
  return std::vector<int64_t>(v->shape.begin(), v->shape.begin() + v->ndim);
}

Result<std::vector<float>> QuantSource::read(const std::string& canonical) const {
  const TensorView* v = model_.weights.find(canonical);
  if (v == nullptr) return not_found(path_ + ": the model has no tensor '" + canonical + "'");
  std::vector<float> out(static_cast<size_t>(v->numel()));
  LATHE_RETURN_IF_ERROR(dequantize_tensor(*v, out.data()).with_context(path_ + ": " + canonical));
  const ModelConfig& c = model_.config;  // as stored: kInterleaved rows are put back here
  if (c.rope_style == RopeStyle::kInterleaved && v->ndim == 2) {
    if (ends_with(canonical, ".attn_q"))
      permute_rope_rows(out.data(), c.num_heads, c.head_dim, v->shape[1], false);
    if (ends_with(canonical, ".attn_k"))
      permute_rope_rows(out.data(), c.num_kv_heads, c.head_dim, v->shape[1], false);
  }
  return out;
}

}  // namespace lathe
