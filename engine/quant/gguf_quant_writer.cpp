#include "engine/quant/gguf_quant_writer.h"

#include <cstring>
#include <map>
#include <optional>

#include "engine/core/half.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/quant/config_export.h"
#include "engine/quant/ggml_quantize.h"
#include "engine/quant/gguf_tensor_plan.h"
#include "engine/quant/gguf_writer.h"
#include "engine/quant/tokenizer_export.h"

namespace lathe {
namespace {

class GgufQuantWriter final : public QuantOutputWriter {
 public:
  GgufQuantWriter(const QuantSource& source, const QuantScheme& scheme)
      : source_(source), scheme_(scheme) {}

  Status plan() {
    const ModelConfig& c = source_.config();
    LATHE_RETURN_IF_ERROR(plan_metadata());
    rope_freqs_ = gguf_rope_freq_factors(c);
    for (GgufPlannedTensor& p : plan_gguf_tensors(
             c, scheme_.gguf, [&](const std::string& n) { return source_.shape(n); },
             static_cast<int64_t>(rope_freqs_.size()))) {
      order_.push_back(p.canonical);
      types_[p.canonical] = p.spec.dtype;
      specs_.push_back(std::move(p.spec));
    }
    if (gguf_file_size(metadata_, specs_) < 0)
      return internal_error("the planned GGUF file is inconsistent");
    return Status();
  }

  bool output_is_folder() const override { return false; }
  int64_t expected_bytes() const override { return gguf_file_size(metadata_, specs_); }
  const std::vector<std::string>& order() const override { return order_; }
  bool is_quantized(const std::string& name) const override {
    const auto it = types_.find(name);
    return it != types_.end() && lathe::is_quantized(it->second);
  }

  Status begin(const std::string& path) override {
    LATHE_ASSIGN_OR_RETURN(GgufWriter w, GgufWriter::create(path, metadata_, specs_));
    writer_.emplace(std::move(w));
    return Status();
  }

  Status write_tensor(const std::string& name, std::vector<float> data) override {
    const size_t i = next_++;
    if (i >= specs_.size() || order_[i] != name)
      return internal_error("GGUF tensor '" + name + "' written out of order");
    const GgufTensorSpec& spec = specs_[i];
    if (name == kGgufRopeFreqs) data = rope_freqs_;
    const ModelConfig& c = source_.config();
    const int64_t cols = spec.shape.back();
    const int64_t rows = cols > 0 ? static_cast<int64_t>(data.size()) / cols : 0;
    if (c.arch == Architecture::kLlama || c.arch == Architecture::kMistral) {
      if (ends_with(name, ".attn_q"))
        permute_rope_rows(data.data(), c.num_heads, c.head_dim, cols, true);
      if (ends_with(name, ".attn_k"))
        permute_rope_rows(data.data(), c.num_kv_heads, c.head_dim, cols, true);
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(spec.nbytes()));
    if (spec.dtype == DType::kF32) {
      std::memcpy(bytes.data(), data.data(), bytes.size());
    } else if (spec.dtype == DType::kF16) {
      for (size_t j = 0; j < data.size(); ++j) {
        const uint16_t h = f32_to_f16(data[j]);
        std::memcpy(bytes.data() + 2 * j, &h, 2);
      }
    } else {
      LATHE_RETURN_IF_ERROR(quantize_rows_ggml(spec.dtype, data.data(), rows, cols, bytes.data())
                                .with_context(spec.name));
    }
    ++counts_[std::string(dtype_name(spec.dtype))];
    return writer_->write(spec.name, bytes.data(), bytes.size());
  }

  Result<std::vector<std::string>> finish() override {
    LATHE_RETURN_IF_ERROR(writer_->finish());
    writer_.reset();
    std::string mix;
    for (const auto& [type, n] : counts_)
      mix += (mix.empty() ? "" : ", ") + type + " x" + std::to_string(n);
    return std::vector<std::string>{"tensor types: " + mix};
  }

 private:
  Status plan_metadata() {
    if (source_.is_gguf()) {
      for (const auto& [key, value] : source_.gguf()->metadata())
        if (!starts_with(key, "split.")) metadata_.emplace_back(key, value);
    } else {
      const ModelConfig& c = source_.config();
      metadata_ = gguf_model_metadata(c);
      Result<GgufMetadata> tok = gguf_tokenizer_metadata_from_hf(source_.hf_folder(), c.vocab_size);
      if (tok.is_ok()) {
        for (auto& [k, v] : tok.value()) gguf_set(metadata_, k, std::move(v));
      } else if (tok.status().code() == ErrorCode::kNotFound) {
        log_warning(tok.status().message() +
                    "; the GGUF gets no vocabulary (it loads for logits, not for text)");
      } else {
        return tok.status();
      }
      const GenerationDefaults& g = source_.model().generation;
      if (g.temperature >= 0) gguf_set(metadata_, "general.sampling.temp", gguf_f32(g.temperature));
      if (g.top_p >= 0) gguf_set(metadata_, "general.sampling.top_p", gguf_f32(g.top_p));
      if (g.top_k >= 0) gguf_set(metadata_, "general.sampling.top_k", gguf_i32(g.top_k));
    }
    gguf_set_quantization_keys(metadata_, scheme_.gguf);
    return Status();
  }

  const QuantSource& source_;
  QuantScheme scheme_;
  GgufMetadata metadata_;
  std::vector<std::string> order_;
  std::vector<GgufTensorSpec> specs_;
  std::map<std::string, DType> types_;
  std::vector<float> rope_freqs_;
  std::optional<GgufWriter> writer_;
  size_t next_ = 0;
  std::map<std::string, int> counts_;
};

}  // namespace

Result<std::unique_ptr<QuantOutputWriter>> make_gguf_quant_writer(const QuantSource& source,
                                                                  const QuantScheme& scheme) {
  if (scheme.kind != QuantKind::kGguf)
    return internal_error("make_gguf_quant_writer called for a non-GGUF scheme");
  auto w = std::make_unique<GgufQuantWriter>(source, scheme);
  LATHE_RETURN_IF_ERROR(w->plan());
  return std::unique_ptr<QuantOutputWriter>(std::move(w));
}

}  // namespace lathe
