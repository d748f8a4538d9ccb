#include "engine/quant/calib_block.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/quant/calib_ops.h"

namespace lathe {
namespace {

Result<CalibLinear> read_linear(const QuantSource& s, const std::string& name,
                                const std::string& bias_name) {
  CalibLinear l;
  LATHE_ASSIGN_OR_RETURN(l.w, s.read(name));
  const std::vector<int64_t> shape = s.shape(name);
  l.n = shape[0];
  l.k = shape[1];
  if (!bias_name.empty() && s.has(bias_name)) {
    LATHE_ASSIGN_OR_RETURN(l.bias, s.read(bias_name));
  }
  return l;
}

}  // namespace

CalibLayout make_calib_layout(const std::vector<std::vector<TokenId>>& samples) {
  CalibLayout l;
  l.start.push_back(0);
  for (const auto& s : samples) {
    for (size_t p = 0; p < s.size(); ++p) l.positions.push_back(static_cast<int32_t>(p));
    l.start.push_back(l.start.back() + static_cast<int64_t>(s.size()));
  }
  return l;
}

Result<BlockTensors> read_block_tensors(const QuantSource& s, int64_t layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  BlockTensors t;
  LATHE_ASSIGN_OR_RETURN(t.attn_norm, s.read(p + "attn_norm"));
  LATHE_ASSIGN_OR_RETURN(t.ffn_norm, s.read(p + "ffn_norm"));
  if (s.has(p + "attn_q_norm")) {
    LATHE_ASSIGN_OR_RETURN(t.q_norm, s.read(p + "attn_q_norm"));
    LATHE_ASSIGN_OR_RETURN(t.k_norm, s.read(p + "attn_k_norm"));
  }
  LATHE_ASSIGN_OR_RETURN(t.q, read_linear(s, p + "attn_q", p + "attn_q_bias"));
  LATHE_ASSIGN_OR_RETURN(t.k, read_linear(s, p + "attn_k", p + "attn_k_bias"));
  LATHE_ASSIGN_OR_RETURN(t.v, read_linear(s, p + "attn_v", p + "attn_v_bias"));
  LATHE_ASSIGN_OR_RETURN(t.o, read_linear(s, p + "attn_output", ""));
  LATHE_ASSIGN_OR_RETURN(t.gate, read_linear(s, p + "ffn_gate", ""));
  LATHE_ASSIGN_OR_RETURN(t.up, read_linear(s, p + "ffn_up", ""));
  LATHE_ASSIGN_OR_RETURN(t.down, read_linear(s, p + "ffn_down", ""));
  return t;
}

Result<std::vector<float>> calib_embeddings(const QuantSource& source,
                                            const std::vector<std::vector<TokenId>>& samples) {
  const std::vector<int64_t> shape = source.shape("token_embd");
  if (shape.size() != 2) return not_found("the source has no token_embd tensor");
  const int64_t vocab = shape[0];
  std::vector<TokenId> ids;
  for (const auto& s : samples) ids.insert(ids.end(), s.begin(), s.end());
  for (TokenId id : ids)
    if (id < 0 || id >= vocab)
      return invalid_argument("calibration token id " + std::to_string(id) +
                              " is outside the model's vocabulary of " + std::to_string(vocab) +
                              " embeddings; the tokenizer does not match the weights");
  return source.read_rows("token_embd", ids);
}

CalibBlock::CalibBlock(const ModelConfig& config, const CalibLayout& layout, CalibOps& ops)
    : c_(config), layout_(layout), inv_freq_(cpu::rope_inv_freq(config)), ops_(&ops) {}

Result<CalibTensorPtr> CalibBlock::alloc(int64_t cols) const {
  return ops_->alloc(rows(), cols);
}

Status CalibBlock::norm(const CalibTensor& x, const std::vector<float>& weight,
                        CalibTensor& out) const {
  return ops_->rms_norm(x, c_.hidden_size, weight, static_cast<float>(c_.rms_norm_eps), out);
}

Status CalibBlock::linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) const {
  return ops_->linear(x, l, y);
}

Status CalibBlock::rope_tables() const {
  if (cos_ != nullptr) return Status::ok();
  const int64_t r = rows(), half = static_cast<int64_t>(inv_freq_.size());
  std::vector<float> cos_h(static_cast<size_t>(r * half)), sin_h(cos_h.size());
  cpu::rope_table(layout_.positions.data(), r, inv_freq_, cos_h.data(), sin_h.data());
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr c, calib_upload(*ops_, cos_h.data(), r, half));
  LATHE_ASSIGN_OR_RETURN(sin_, calib_upload(*ops_, sin_h.data(), r, half));
  cos_ = std::move(c);
  return Status::ok();
}

Status CalibBlock::attention(const BlockTensors& t, CalibTensor& q, CalibTensor& k,
                             const CalibTensor& v, CalibTensor& out) const {
  const int64_t hd = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  if (!t.q_norm.empty()) {
    LATHE_RETURN_IF_ERROR(ops_->rms_norm(q, hd, t.q_norm, eps, q));
    LATHE_RETURN_IF_ERROR(ops_->rms_norm(k, hd, t.k_norm, eps, k));
  }
  LATHE_RETURN_IF_ERROR(rope_tables());
  LATHE_RETURN_IF_ERROR(ops_->rope(q, nh, hd, *cos_, *sin_, c_.rope_style));
  LATHE_RETURN_IF_ERROR(ops_->rope(k, nkv, hd, *cos_, *sin_, c_.rope_style));
  const CalibAttentionShape shape{nh, nkv, hd, c_.sliding_window};
  return ops_->attention(layout_, shape, q, k, v, out);
}

Status CalibBlock::mlp_act(const CalibTensor& h2, const CalibLinear& gate, const CalibLinear& up,
                           CalibTensor& m) const {
  return ops_->mlp_act(h2, gate, up, m);
}

Result<std::vector<double>> CalibBlock::hessian(const CalibTensor& x, int64_t n) const {
  return ops_->hessian(x, n);
}

Status CalibBlock::forward(const BlockTensors& t, CalibTensor& x) const {
  const int64_t hidden = c_.hidden_size;
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr h, alloc(hidden));
  LATHE_RETURN_IF_ERROR(norm(x, t.attn_norm, *h));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr a, alloc(t.o.k));
  {
    LATHE_ASSIGN_OR_RETURN(CalibTensorPtr q, alloc(t.q.n));
    LATHE_ASSIGN_OR_RETURN(CalibTensorPtr k, alloc(t.k.n));
    LATHE_ASSIGN_OR_RETURN(CalibTensorPtr v, alloc(t.v.n));
    LATHE_RETURN_IF_ERROR(linear(*h, t.q, *q));
    LATHE_RETURN_IF_ERROR(linear(*h, t.k, *k));
    LATHE_RETURN_IF_ERROR(linear(*h, t.v, *v));
    LATHE_RETURN_IF_ERROR(attention(t, *q, *k, *v, *a));
  }
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr y, alloc(hidden));
  LATHE_RETURN_IF_ERROR(linear(*a, t.o, *y));
  a.reset();
  LATHE_RETURN_IF_ERROR(ops_->add(x, *y));
  LATHE_RETURN_IF_ERROR(norm(x, t.ffn_norm, *h));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr m, alloc(t.down.k));
  LATHE_RETURN_IF_ERROR(mlp_act(*h, t.gate, t.up, *m));
  LATHE_RETURN_IF_ERROR(linear(*m, t.down, *y));
  return ops_->add(x, *y);
}

}  // namespace lathe
