#include "engine/quant/quant_source.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/core/strings.h"
#include "engine/model/dequant.h"
#include "engine/model/model_loader.h"
#include "engine/quant/config_export.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

bool is_gguf_file(const fs::path& p) {
  if (p.extension() == ".gguf") return true;
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

// The folder a dummy source reads its config.json from, or why `path` is not one.
Result<std::string> dummy_config_folder(const std::string& path) {
  const std::string what = "--load-format dummy: " + path;
  std::error_code ec;
  if (!fs::exists(path, ec)) return not_found(path + ": no such file or folder");
  fs::path folder(path);
  if (!fs::is_directory(path, ec)) {
    if (is_gguf_file(path))
      return invalid_argument(
          what +
          " is a GGUF file; dummy weights take the shape of a folder's config.json (e.g. "
          "benchmarks/configs/llama-3.1-8b). Quantize the file itself without --load-format dummy");
    if (folder.filename() != "config.json")
      return invalid_argument(what +
                              " is not a folder; pass a folder holding a config.json (e.g. "
                              "benchmarks/configs/llama-3.1-8b)");
    folder = folder.has_parent_path() ? folder.parent_path() : fs::path(".");
  }
  if (!fs::is_regular_file(folder / "config.json", ec))
    return not_found(what +
                     " has no config.json; dummy weights take the model's shape from it (e.g. "
                     "benchmarks/configs/llama-3.1-8b, benchmarks/configs/llama-3.1-70b)");
  return folder.string();
}

}  // namespace

Result<QuantSource> QuantSource::open(const std::string& path, LoadFormat format) {
  if (format == LoadFormat::kDummy) {
    QuantSource s;
    s.path_ = path;
    LATHE_ASSIGN_OR_RETURN(s.hf_folder_, dummy_config_folder(path));
    LoadOptions options;
    options.load_format = LoadFormat::kDummy;
    options.load_tokenizer = false;
    LATHE_ASSIGN_OR_RETURN(s.model_, load_model(s.hf_folder_, options));
    s.config_ = s.model_.config;
    s.dummy_ = std::make_shared<const DummyWeights>(s.config_);
    return s;
  }
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

bool QuantSource::has(const std::string& canonical) const {
  return dummy_ ? dummy_->has(canonical) : model_.weights.contains(canonical);
}

std::vector<int64_t> QuantSource::shape(const std::string& canonical) const {
  if (dummy_) return dummy_->shape(canonical);
  const TensorView* v = model_.weights.find(canonical);
  if (v == nullptr) return {};
  return std::vector<int64_t>(v->shape.begin(), v->shape.begin() + v->ndim);
}

Result<std::vector<float>> QuantSource::read(const std::string& canonical) const {
  if (dummy_) return dummy_->read(canonical);
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

Result<std::vector<float>> QuantSource::read_rows(const std::string& canonical,
                                                  const std::vector<TokenId>& rows) const {
  const std::vector<int64_t> sh = shape(canonical);
  if (sh.size() != 2) return not_found(path_ + ": the model has no 2-D tensor '" + canonical + "'");
  const int64_t n = sh[0], k = sh[1];
  for (TokenId r : rows)
    if (r < 0 || r >= n)
      return invalid_argument(strformat("%s: row %d is outside %s's %lld rows", path_.c_str(), r,
                                        canonical.c_str(), static_cast<long long>(n)));
  std::vector<float> out(rows.size() * static_cast<size_t>(k));
  if (dummy_) {
    for (size_t i = 0; i < rows.size(); ++i)
      LATHE_RETURN_IF_ERROR(dummy_->read(canonical, rows[i] * k, k, out.data() + i * k));
    return out;
  }
  // Embedding-style gather in the stored dtype (row order: a token_embd is never permuted).
  cpu::embedding(*model_.weights.find(canonical), rows.data(), static_cast<int64_t>(rows.size()),
                 out.data());
  return out;
}

}  // namespace lathe
