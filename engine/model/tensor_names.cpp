#include "engine/model/tensor_names.h"

#include <charconv>

#include "engine/core/strings.h"
#include "engine/model/weight_store.h"

namespace lathe {
namespace {

struct Suffix {
  std::string_view file;       // part after the layer index
  std::string_view canonical;  // canonical suffix
};

constexpr Suffix kHfLayer[] = {
    {"input_layernorm.weight", "attn_norm"},
    {"self_attn.q_proj.weight", "attn_q"},
    {"self_attn.k_proj.weight", "attn_k"},
    {"self_attn.v_proj.weight", "attn_v"},
    {"self_attn.q_proj.bias", "attn_q_bias"},
    {"self_attn.k_proj.bias", "attn_k_bias"},
    {"self_attn.v_proj.bias", "attn_v_bias"},
    {"self_attn.o_proj.weight", "attn_output"},
    {"self_attn.q_norm.weight", "attn_q_norm"},
    {"self_attn.k_norm.weight", "attn_k_norm"},
    {"post_attention_layernorm.weight", "ffn_norm"},
    {"mlp.gate_proj.weight", "ffn_gate"},
    {"mlp.up_proj.weight", "ffn_up"},
    {"mlp.down_proj.weight", "ffn_down"},
};

constexpr Suffix kGgufLayer[] = {
    {"attn_norm.weight", "attn_norm"},     {"attn_q.weight", "attn_q"},
    {"attn_k.weight", "attn_k"},           {"attn_v.weight", "attn_v"},
    {"attn_q.bias", "attn_q_bias"},        {"attn_k.bias", "attn_k_bias"},
    {"attn_v.bias", "attn_v_bias"},        {"attn_output.weight", "attn_output"},
    {"attn_q_norm.weight", "attn_q_norm"}, {"attn_k_norm.weight", "attn_k_norm"},
    {"ffn_norm.weight", "ffn_norm"},       {"ffn_gate.weight", "ffn_gate"},
    {"ffn_up.weight", "ffn_up"},           {"ffn_down.weight", "ffn_down"},
};

// "<prefix><N>.<rest>" with a plain decimal N -> canonical "blk.N.<suffix>", else "".
template <size_t K>
std::string map_layer(std::string_view name, std::string_view prefix, const Suffix (&table)[K]) {
  if (!starts_with(name, prefix)) return "";
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return "";
  int64_t layer = -1;
  const auto [ptr, ec] = std::from_chars(name.data(), name.data() + dot, layer);
  if (ec != std::errc() || ptr != name.data() + dot || layer < 0) return "";
  const std::string_view rest = name.substr(dot + 1);
  for (const Suffix& s : table)
    if (rest == s.file) return WeightStore::layer_name(layer, std::string(s.canonical).c_str());
  return "";
}

// "blk.<N>.<canonical suffix>" -> "<prefix><N>.<file suffix>" through `table`, else "".
template <size_t K>
std::string unmap_layer(std::string_view canonical, std::string_view prefix,
                        const Suffix (&table)[K]) {
  if (!starts_with(canonical, "blk.")) return "";
  canonical.remove_prefix(4);
  const size_t dot = canonical.find('.');
  if (dot == std::string_view::npos || dot == 0) return "";
  int64_t layer = -1;
  const auto [ptr, ec] = std::from_chars(canonical.data(), canonical.data() + dot, layer);
  if (ec != std::errc() || ptr != canonical.data() + dot || layer < 0) return "";
  const std::string_view rest = canonical.substr(dot + 1);
  for (const Suffix& s : table)
    if (rest == s.canonical)
      return std::string(prefix) + std::to_string(layer) + "." + std::string(s.file);
  return "";
}

}  // namespace

std::string hf_name_from_canonical(std::string_view c) {
  if (c == "token_embd") return "model.embed_tokens.weight";
  if (c == "output_norm") return "model.norm.weight";
  if (c == "output") return "lm_head.weight";
  return unmap_layer(c, "model.layers.", kHfLayer);
}

std::string gguf_name_from_canonical(std::string_view c) {
  if (c == "token_embd") return "token_embd.weight";
  if (c == "output_norm") return "output_norm.weight";
  if (c == "output") return "output.weight";
  return unmap_layer(c, "blk.", kGgufLayer);
}

namespace {

std::string canonical_plain_from_hf(std::string_view n) {
  if (n == "model.embed_tokens.weight") return "token_embd";
  if (n == "model.norm.weight") return "output_norm";
  if (n == "lm_head.weight") return "output";
  return map_layer(n, "model.layers.", kHfLayer);
}

}  // namespace

std::string canonical_name_from_hf(std::string_view n) {
  std::string c = canonical_plain_from_hf(n);
  if (!c.empty()) return c;
  // A quantized part "<module>.<part>" of a projection: "<canonical>.<part>".
  const size_t dot = n.rfind('.');
  if (dot == std::string_view::npos) return "";
  const std::string_view part = n.substr(dot + 1);
  for (std::string_view p : kQuantizedParts) {
    if (part != p) continue;
    c = canonical_plain_from_hf(std::string(n.substr(0, dot)) + ".weight");
    if (c.empty() || c == "token_embd" || c == "output_norm" || ends_with(c, "norm") ||
        ends_with(c, "_bias"))
      return "";
    return c + "." + std::string(part);
  }
  return "";
}

std::string canonical_name_from_gguf(std::string_view n) {
  if (n == "token_embd.weight") return "token_embd";
  if (n == "output_norm.weight") return "output_norm";
  if (n == "output.weight") return "output";
  return map_layer(n, "blk.", kGgufLayer);
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), ff = c.intermediate_size;
  out.push_back({"token_embd", {c.vocab_size, h}, false});
  out.push_back({"output_norm", {h}, true});
  if (!c.tie_word_embeddings) out.push_back({"output", {c.vocab_size, h}, false});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto name = [i](const char* s) { return WeightStore::layer_name(i, s); };
    out.push_back({name("attn_norm"), {h}, true});
    out.push_back({name("attn_q"), {q, h}, false});
    out.push_back({name("attn_k"), {kv, h}, false});
    out.push_back({name("attn_v"), {kv, h}, false});
    if (c.attention_bias) {
      out.push_back({name("attn_q_bias"), {q}, true});
      out.push_back({name("attn_k_bias"), {kv}, true});
      out.push_back({name("attn_v_bias"), {kv}, true});
    }
    if (c.qk_norm) {
      out.push_back({name("attn_q_norm"), {c.head_dim}, true});
      out.push_back({name("attn_k_norm"), {c.head_dim}, true});
    }
    out.push_back({name("attn_output"), {h, q}, false});
    out.push_back({name("ffn_norm"), {h}, true});
    out.push_back({name("ffn_gate"), {ff, h}, false});
    out.push_back({name("ffn_up"), {ff, h}, false});
    out.push_back({name("ffn_down"), {h, ff}, false});
  }
  return out;
}

const char* tensor_group(std::string_view n) {
  if (n == "token_embd" || starts_with(n, "token_embd.")) return "embedding";
  if (n == "output" || starts_with(n, "output.")) return "output";
  if (ends_with(n, "norm"))
    return "norms";  // attn_norm, ffn_norm, output_norm, attn_q_norm, attn_k_norm
  if (n.find(".ffn_") != std::string_view::npos) return "mlp";
  return "attention";
}

}  // namespace lathe
