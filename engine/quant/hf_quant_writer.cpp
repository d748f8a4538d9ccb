#include "engine/quant/hf_quant_writer.h"

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/core/half.h"
#include "engine/core/read_file.h"
#include "engine/core/strings.h"
#include "engine/model/gguf_model.h"
#include "engine/model/tensor_names.h"
#include "engine/quant/awq_layout.h"
#include "engine/quant/compressed_tensors_layout.h"
#include "engine/quant/config_export.h"
#include "engine/quant/gptq_layout.h"
#include "engine/quant/tokenizer_export.h"

namespace lathe {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// Files of an HF source that travel with the weights unchanged.
constexpr const char* kCopiedFiles[] = {
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
    "chat_template.jinja",
    "chat_template.json",
};

std::string prefix_of(const std::string& hf_name) {
  return hf_name.substr(0, hf_name.size() - std::string(".weight").size());
}

class HfQuantWriter final : public QuantOutputWriter {
 public:
  HfQuantWriter(const QuantSource& source, const QuantScheme& scheme, int64_t max_shard_bytes)
      : source_(source), scheme_(scheme), max_shard_bytes_(max_shard_bytes) {}

  Status plan() {
    dtype16_ = scheme_.kind == QuantKind::kDense ? scheme_.dense_dtype : hf_output_dtype(source_);
    dtype16_name_ = dtype16_ == DType::kF16 ? "F16" : "BF16";
    const ModelConfig& c = source_.config();
    for (const ExpectedTensor& t : expected_tensors(c)) {
      order_.push_back(t.name);
      const std::string hf = hf_name_from_canonical(t.name);
      if (!is_quantized(t.name)) {
        specs_.push_back({hf, dtype16_name_, t.shape});
        continue;
      }
      const int64_t n = t.shape[0], k = t.shape[1];
      LATHE_RETURN_IF_ERROR(check_linear(hf, n, k));
      for (SafetensorsTensorSpec& s : linear_specs(prefix_of(hf), n, k)) specs_.push_back(s);
    }
    return Status();
  }

  bool output_is_folder() const override { return true; }
  const std::vector<std::string>& order() const override { return order_; }
  bool is_quantized(const std::string& name) const override {
    return scheme_.kind != QuantKind::kDense && is_quantized_linear(name);
  }

  int64_t expected_bytes() const override {
    int64_t side = 1 << 20;  // configs
    std::error_code ec;
    if (source_.is_gguf()) {
      side += 2 * static_cast<int64_t>(source_.gguf()->data_offset());  // tokenizer from metadata
    } else {
      for (const char* f : kCopiedFiles) {
        const fs::path p = fs::path(source_.hf_folder()) / f;
        if (fs::exists(p, ec)) side += static_cast<int64_t>(fs::file_size(p, ec));
      }
    }
    return SafetensorsFolderWriter::expected_bytes(specs_, max_shard_bytes_) + side;
  }

  Status begin(const std::string& folder) override {
    folder_ = folder;
    LATHE_ASSIGN_OR_RETURN(SafetensorsFolderWriter w,
                           SafetensorsFolderWriter::create(folder, specs_, max_shard_bytes_));
    writer_.emplace(std::move(w));
    return Status();
  }

  Status write_tensor(const std::string& name, std::vector<float> data) override {
    const std::string hf = hf_name_from_canonical(name);
    const std::vector<int64_t> shape = source_.shape(name);
    if (!is_quantized(name)) {
      const std::vector<uint8_t> bytes = float_bytes(data, dtype16_name_);
      return writer_->write(hf, bytes.data(), bytes.size());
    }
    ++num_quantized_;
    LATHE_ASSIGN_OR_RETURN(std::vector<PackedTensor> packed, pack(prefix_of(hf), data, shape));
    for (const PackedTensor& p : packed)
      LATHE_RETURN_IF_ERROR(writer_->write(p.spec.name, p.data.data(), p.data.size()));
    return Status();
  }

  Status write_quantized(const std::string& name, const IntQuantizedMatrix& q) override {
    if (scheme_.kind != QuantKind::kInt || !is_quantized_linear(name))
      return internal_error("write_quantized: " + name + " is not an integer-quantized linear");
    const std::vector<int64_t> shape = source_.shape(name);
    if (q.rows != shape[0] || q.cols != shape[1])
      return internal_error("write_quantized: " + name + " has the wrong shape");
    ++num_quantized_;
    LATHE_ASSIGN_OR_RETURN(std::vector<PackedTensor> packed,
                           pack_int(prefix_of(hf_name_from_canonical(name)), q));
    for (const PackedTensor& p : packed)
      LATHE_RETURN_IF_ERROR(writer_->write(p.spec.name, p.data.data(), p.data.size()));
    return Status();
  }

  Result<std::vector<std::string>> finish() override {
    LATHE_RETURN_IF_ERROR(writer_->finish());
    const int shards = writer_->num_shards();
    writer_.reset();
    LATHE_RETURN_IF_ERROR(write_configs());
    LATHE_RETURN_IF_ERROR(write_tokenizer());
    std::vector<std::string> notes;
    notes.push_back(strformat("%lld linear layers quantized (%s); %lld tensors kept in %s",
                              static_cast<long long>(num_quantized_), scheme_.description().c_str(),
                              static_cast<long long>(order_.size()) - num_quantized_,
                              dtype16_ == DType::kF16 ? "f16" : "bf16"));
    if (shards > 1) notes.push_back(strformat("weights in %d safetensors shards", shards));
    return notes;
  }

 private:
  Status check_linear(const std::string& hf, int64_t n, int64_t k) const {
    if (scheme_.kind == QuantKind::kFp8) return Status();
    const IntQuantConfig& c = scheme_.int_config;
    Status s = validate_int_quant_config(c, k);
    if (s.is_ok() && scheme_.format == QuantOutputFormat::kGptq) s = check_gptq_shape(n, k, c.bits);
    if (s.is_ok() && scheme_.format == QuantOutputFormat::kAwq) s = check_awq_shape(n, k, c.bits);
    return s.is_ok()
               ? s
               : s.with_context(hf + " [" + std::to_string(n) + ", " + std::to_string(k) + "]");
  }

  std::vector<SafetensorsTensorSpec> linear_specs(const std::string& prefix, int64_t n,
                                                  int64_t k) const {
    if (scheme_.kind == QuantKind::kFp8) return ct_fp8_linear_specs(prefix, n, k, scheme_.fp8);
    const IntQuantConfig& c = scheme_.int_config;
    const int64_t groups = k / effective_group_size(c, k);
    switch (scheme_.format) {
      case QuantOutputFormat::kGptq:
        return gptq_linear_specs(prefix, n, k, c.bits, groups);
      case QuantOutputFormat::kAwq:
        return awq_linear_specs(prefix, n, k, groups);
      default:
        return ct_int_linear_specs(prefix, n, k, c.bits, groups, c.symmetric, false, dtype16_name_);
    }
  }

  Result<std::vector<PackedTensor>> pack(const std::string& prefix, const std::vector<float>& w,
                                         const std::vector<int64_t>& shape) const {
    const int64_t n = shape[0], k = shape[1];
    if (scheme_.kind == QuantKind::kFp8)
      return pack_ct_fp8_linear(prefix, quantize_fp8(w.data(), n, k, scheme_.fp8));
    LATHE_ASSIGN_OR_RETURN(IntQuantizedMatrix q,
                           quantize_int_rtn(w.data(), n, k, scheme_.int_config));
    return pack_int(prefix, q);
  }

  Result<std::vector<PackedTensor>> pack_int(const std::string& prefix,
                                             const IntQuantizedMatrix& q) const {
    switch (scheme_.format) {
      case QuantOutputFormat::kGptq:
        return pack_gptq_linear(prefix, q);
      case QuantOutputFormat::kAwq:
        return pack_awq_linear(prefix, q);
      default:
        return pack_ct_int_linear(prefix, q, dtype16_name_);
    }
  }

  std::string quantization_config_json() const {
    const IntQuantConfig& c = scheme_.int_config;
    if (scheme_.kind == QuantKind::kFp8) return ct_fp8_quantization_config_json(scheme_.fp8);
    switch (scheme_.format) {
      case QuantOutputFormat::kGptq:
        return gptq_quantize_config_json({c.bits, c.group_size, c.symmetric, scheme_.desc_act,
                                          scheme_.damp_percent, scheme_.name});
      case QuantOutputFormat::kAwq:
        return awq_quantization_config_json(c.group_size, true);
      default:
        return ct_int_quantization_config_json(c.bits, c.group_size, c.symmetric, false);
    }
  }

  Status write_configs() const {
    const std::string torch_dtype = dtype16_ == DType::kF16 ? "float16" : "bfloat16";
    ojson config;
    if (source_.is_gguf()) {
      LATHE_ASSIGN_OR_RETURN(GgufTokenizerData tok, read_gguf_tokenizer_data(*source_.gguf()));
      LATHE_ASSIGN_OR_RETURN(
          std::string text,
          hf_config_json(source_.config(), source_.model().generation, tok.bos_id, torch_dtype));
      config = ojson::parse(text);
    } else {
      const std::string path = (fs::path(source_.hf_folder()) / "config.json").string();
      LATHE_ASSIGN_OR_RETURN(std::string text, read_file(path));
      config = ojson::parse(text, nullptr, false);
      if (config.is_discarded() || !config.is_object())
        return corrupt_file(path + ": not a JSON object");
      config["torch_dtype"] = torch_dtype;
      if (config.contains("dtype")) config["dtype"] = torch_dtype;
    }
    if (scheme_.kind != QuantKind::kDense) {
      config["quantization_config"] = ojson::parse(quantization_config_json());
    } else {
      config.erase("quantization_config");
    }
    LATHE_RETURN_IF_ERROR(write_small_file(folder_ + "/config.json", config.dump(2) + "\n"));
    if (scheme_.kind == QuantKind::kInt && scheme_.format == QuantOutputFormat::kGptq)
      LATHE_RETURN_IF_ERROR(
          write_small_file(folder_ + "/quantize_config.json", quantization_config_json() + "\n"));
    if (scheme_.kind == QuantKind::kInt && scheme_.format == QuantOutputFormat::kAwq)
      LATHE_RETURN_IF_ERROR(
          write_small_file(folder_ + "/quant_config.json",
                           awq_quant_config_json(scheme_.int_config.group_size, true) + "\n"));
    return Status();
  }

  Status write_tokenizer() const {
    if (!source_.is_gguf()) {
      std::error_code ec;
      for (const char* f : kCopiedFiles) {
        const fs::path from = fs::path(source_.hf_folder()) / f;
        if (!fs::exists(from, ec)) continue;
        LATHE_ASSIGN_OR_RETURN(std::string text, read_file(from.string()));
        LATHE_RETURN_IF_ERROR(write_small_file(folder_ + "/" + f, text));
      }
      return Status();
    }
    LATHE_ASSIGN_OR_RETURN(GgufTokenizerData tok, read_gguf_tokenizer_data(*source_.gguf()));
    LATHE_ASSIGN_OR_RETURN(auto files,
                           hf_tokenizer_files_from_gguf(tok, source_.model().chat_template,
                                                        source_.config().max_position_embeddings));
    for (const auto& [name, contents] : files)
      LATHE_RETURN_IF_ERROR(write_small_file(folder_ + "/" + name, contents));
    return write_small_file(folder_ + "/generation_config.json",
                            hf_generation_config_json(source_.model().generation, tok.bos_id));
  }

  const QuantSource& source_;
  QuantScheme scheme_;
  int64_t max_shard_bytes_;
  DType dtype16_ = DType::kBF16;
  std::string dtype16_name_ = "BF16";
  std::vector<std::string> order_;
  std::vector<SafetensorsTensorSpec> specs_;
  std::string folder_;
  std::optional<SafetensorsFolderWriter> writer_;
  int64_t num_quantized_ = 0;
};

}  // namespace

bool is_quantized_linear(const std::string& c) {
  for (const char* s :
       {".attn_q", ".attn_k", ".attn_v", ".attn_output", ".ffn_gate", ".ffn_up", ".ffn_down"})
    if (ends_with(c, s)) return true;
  return false;
}

DType hf_output_dtype(const QuantSource& source) {
  return !source.is_gguf() && source.weight_dtype() == DType::kF16 ? DType::kF16 : DType::kBF16;
}

Result<std::unique_ptr<QuantOutputWriter>> make_hf_quant_writer(const QuantSource& source,
                                                                const QuantScheme& scheme,
                                                                int64_t max_shard_bytes) {
  if (scheme.format == QuantOutputFormat::kGguf)
    return internal_error("make_hf_quant_writer called for a GGUF scheme");
  auto w = std::make_unique<HfQuantWriter>(source, scheme, max_shard_bytes);
  LATHE_RETURN_IF_ERROR(w->plan());
  return std::unique_ptr<QuantOutputWriter>(std::move(w));
}

}  // namespace lathe
