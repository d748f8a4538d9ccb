#include "engine/model/layer_weights.h"

#include <algorithm>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"
#include "engine/model/weight_scheme.h"

namespace lathe {

int64_t LinearGroup::n() const {
  int64_t n = 0;
  for (const WeightMatrix& m : parts) n += m.n;
  return n;
}

int64_t LinearGroup::k() const {
  return parts.empty() ? 0 : parts.front().k;
}

bool LinearGroup::has_bias() const {
  for (const TensorView& b : biases)
    if (b.ndim > 0) return true;
  return false;
}

int64_t LinearGroup::bytes() const {
  int64_t b = 0;
  for (const WeightMatrix& m : parts) b += m.bytes();
  return b;
}

const LinearGroup& ModelWeights::linear(int64_t layer, LinearSlot slot) const {
  return projection(layers[static_cast<size_t>(layer)], lm_head, slot);
}

int64_t ModelWeights::linear_bytes(bool count_tied_head) const {
  int64_t b = 0;
  for (const LayerWeights& l : layers)
    b += l.qkv.bytes() + l.o.bytes() + l.gate_up.bytes() + l.down.bytes();
  const bool tied = !lm_head.parts.empty() && lm_head.parts[0].data.data == token_embd.data;
  if (!tied || count_tied_head) b += lm_head.bytes();
  return b;
}

int64_t ModelWeights::total_bytes() const {
  auto vec = [](const TensorView& t) { return t.data != nullptr ? t.nbytes() : int64_t{0}; };
  int64_t b = linear_bytes() + vec(token_embd) + vec(output_norm);
  for (const LayerWeights& l : layers) {
    for (const TensorView* t : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm}) b += vec(*t);
    for (const LinearGroup* g : {&l.qkv, &l.o, &l.gate_up, &l.down})
      for (const TensorView& t : g->biases) b += vec(t);
  }
  return b;
}

namespace {

// A matrix's format for summaries: "q4_k", "int4 g128 (gptq)".
std::string format_label(const WeightMatrix& m) {
  return m.scheme.empty() ? m.describe() : m.describe() + " (" + m.scheme + ")";
}

// Formats joined with '+', most bytes first.
std::string join_by_bytes(std::vector<std::pair<int64_t, std::string>> parts) {
  std::vector<std::pair<int64_t, std::string>> merged;
  for (const auto& part : parts) {
    const auto& [bytes, label] = part;
    // (Captures `part`, not the binding: clang 14, the fuzz preset's compiler, cannot capture one.)
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&](const auto& p) { return p.second == part.second; });
    if (it == merged.end())
      merged.emplace_back(bytes, label);
    else
      it->first += bytes;
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string s;
  for (const auto& [bytes, label] : merged) s += (s.empty() ? "" : "+") + label;
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> summarize_formats(const ModelConfig& config,
                                                                   const ModelWeights& w) {
  std::vector<std::pair<int64_t, std::string>> attention, mlp, norms;
  for (const LayerWeights& l : w.layers) {
    for (const LinearGroup* g : {&l.qkv, &l.o})
      for (const WeightMatrix& m : g->parts) attention.emplace_back(m.bytes(), format_label(m));
    for (const LinearGroup* g : {&l.gate_up, &l.down})
      for (const WeightMatrix& m : g->parts) mlp.emplace_back(m.bytes(), format_label(m));
    for (const TensorView* t : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm})
      if (t->data != nullptr) norms.emplace_back(t->nbytes(), std::string(dtype_name(t->dtype)));
  }
  norms.emplace_back(w.output_norm.nbytes(), std::string(dtype_name(w.output_norm.dtype)));
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("embedding", std::string(dtype_name(w.token_embd.dtype)));
  if (!attention.empty()) out.emplace_back("attention", join_by_bytes(attention));
  if (!mlp.empty()) out.emplace_back("mlp", join_by_bytes(mlp));
  out.emplace_back("norms", join_by_bytes(norms));
  const bool tied = config.tie_word_embeddings && !w.lm_head.parts.empty() &&
                    w.lm_head.parts[0].data.data == w.token_embd.data;
  out.emplace_back("output", tied ? std::string("tied") : format_label(w.lm_head.parts[0]));
  return out;
}

Result<ModelWeights> bind_model_weights(const LoadedModel& model) {
  if (model.format == ModelFormat::kDummy)
    return internal_error("bind_model_weights: random (dummy) weights are made by the backend");
  const ModelConfig& c = model.config;
  const WeightStore& ws = model.weights;
  LATHE_ASSIGN_OR_RETURN(std::shared_ptr<const WeightScheme> scheme, select_weight_scheme(model));
  const int64_t h = c.hidden_size, qs = c.q_size(), kvs = c.kv_size(), ffn = c.intermediate_size;

  ModelWeights w;
  w.scheme = scheme;
  LATHE_ASSIGN_OR_RETURN(w.token_embd, ws.get("token_embd", {c.vocab_size, h}));
  LATHE_ASSIGN_OR_RETURN(w.output_norm, ws.get("output_norm", {h}));
  if (c.tie_word_embeddings && !ws.contains("output")) {
    w.lm_head.parts.push_back(plain_matrix("token_embd", w.token_embd));
  } else {
    LATHE_ASSIGN_OR_RETURN(WeightMatrix out, scheme->matrix(ws, "output", c.vocab_size, h));
    w.lm_head.parts.push_back(std::move(out));
  }
  w.lm_head.biases.resize(1);

  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    auto name = [i](const char* suffix) { return WeightStore::layer_name(i, suffix); };
    auto add = [&](LinearGroup& g, const char* suffix, int64_t n, int64_t k,
                   const char* bias_suffix) -> Status {
      LATHE_ASSIGN_OR_RETURN(WeightMatrix m, scheme->matrix(ws, name(suffix), n, k));
      g.parts.push_back(std::move(m));
      TensorView bias;
      if (bias_suffix != nullptr) {
        LATHE_ASSIGN_OR_RETURN(bias, ws.get(name(bias_suffix), {n}));
      }
      g.biases.push_back(bias);
      return Status();
    };
    const bool b = c.attention_bias;
    LATHE_RETURN_IF_ERROR(add(l.qkv, "attn_q", qs, h, b ? "attn_q_bias" : nullptr));
    LATHE_RETURN_IF_ERROR(add(l.qkv, "attn_k", kvs, h, b ? "attn_k_bias" : nullptr));
    LATHE_RETURN_IF_ERROR(add(l.qkv, "attn_v", kvs, h, b ? "attn_v_bias" : nullptr));
    LATHE_RETURN_IF_ERROR(add(l.o, "attn_output", h, qs, nullptr));
    LATHE_RETURN_IF_ERROR(add(l.gate_up, "ffn_gate", ffn, h, nullptr));
    LATHE_RETURN_IF_ERROR(add(l.gate_up, "ffn_up", ffn, h, nullptr));
    LATHE_RETURN_IF_ERROR(add(l.down, "ffn_down", h, ffn, nullptr));
    LATHE_ASSIGN_OR_RETURN(l.attn_norm, ws.get(name("attn_norm"), {h}));
    LATHE_ASSIGN_OR_RETURN(l.ffn_norm, ws.get(name("ffn_norm"), {h}));
    if (c.qk_norm) {
      LATHE_ASSIGN_OR_RETURN(l.q_norm, ws.get(name("attn_q_norm"), {c.head_dim}));
      LATHE_ASSIGN_OR_RETURN(l.k_norm, ws.get(name("attn_k_norm"), {c.head_dim}));
    }
  }
  if (model.online_quantization != OnlineQuant::kNone) {
    int64_t stored = 0;  // the layer projections as the checkpoint stores them
    for (const auto& [n, t] : ws.tensors())
      if (starts_with(n, "blk.") && t.ndim == 2) stored += t.nbytes();
    int64_t quantized = 0;
    for (const LayerWeights& l : w.layers)
      quantized += l.qkv.bytes() + l.o.bytes() + l.gate_up.bytes() + l.down.bytes();
    log_info(strformat("--quantization %s: %s; %lld layer projections quantized at load, %s -> %s",
                       online_quant_name(model.online_quantization), scheme->description().c_str(),
                       static_cast<long long>(7 * c.num_layers),
                       format_bytes(static_cast<double>(stored)).c_str(),
                       format_bytes(static_cast<double>(quantized)).c_str()));
  }
  return w;
}

std::vector<MatrixShape> dummy_matrix_order(const ModelConfig& c) {
  const int64_t h = c.hidden_size, qs = c.q_size(), kvs = c.kv_size(), ffn = c.intermediate_size;
  std::vector<MatrixShape> order;
  order.push_back({"token_embd", c.vocab_size, h});
  if (!c.tie_word_embeddings) order.push_back({"output", c.vocab_size, h});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto name = [i](const char* suffix) { return WeightStore::layer_name(i, suffix); };
    order.push_back({name("attn_q"), qs, h});
    order.push_back({name("attn_k"), kvs, h});
    order.push_back({name("attn_v"), kvs, h});
    order.push_back({name("attn_output"), h, qs});
    order.push_back({name("ffn_gate"), ffn, h});
    order.push_back({name("ffn_up"), ffn, h});
    order.push_back({name("ffn_down"), h, ffn});
  }
  return order;
}

}  // namespace lathe
