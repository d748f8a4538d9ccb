#include "engine/quant/calib_block.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/core/thread_pool.h"
#include "engine/quant/calib_ops.h"

namespace lathe {
namespace {

// fn(r0, r1) over [0, rows) in ranges on ThreadPool::global(). The per-row host ops of the
// forward (norms, RoPE, residual adds) are independent per row, so splitting them changes no value.
void for_rows(int64_t rows, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::global().parallel_for(rows, fn);
}

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

void CalibBlock::norm(const float* x, const std::vector<float>& weight, float* out) const {
  const int64_t d = c_.hidden_size;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  for_rows(rows(), [&](int64_t r0, int64_t r1) {
    cpu::rms_norm(x + r0 * d, weight.data(), r1 - r0, d, eps, out + r0 * d);
  });
}

Status CalibBlock::linear(const float* x, int64_t rows_x, const CalibLinear& l, float* y) const {
  return ops_->linear(x, rows_x, l, y);
}

Status CalibBlock::attention(const BlockTensors& t, std::vector<float>& q, std::vector<float>& k,
                             const std::vector<float>& v, float* out) const {
  const int64_t r = rows(), hd = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  for_rows(r, [&](int64_t r0, int64_t r1) {
    float* qr = q.data() + r0 * nh * hd;
    float* kr = k.data() + r0 * nkv * hd;
    if (!t.q_norm.empty()) {
      cpu::rms_norm(qr, t.q_norm.data(), (r1 - r0) * nh, hd, eps, qr);
      cpu::rms_norm(kr, t.k_norm.data(), (r1 - r0) * nkv, hd, eps, kr);
    }
    const int32_t* pos = layout_.positions.data() + r0;
    cpu::rope(qr, pos, r1 - r0, nh, hd, inv_freq_, c_.rope_style);
    cpu::rope(kr, pos, r1 - r0, nkv, hd, inv_freq_, c_.rope_style);
  });
  const CalibAttentionShape shape{nh, nkv, hd, c_.sliding_window};
  return ops_->attention(layout_, shape, q.data(), k.data(), v.data(), out);
}

Status CalibBlock::mlp_act(const float* h2, const CalibLinear& gate, const CalibLinear& up,
                           float* m) const {
  return ops_->mlp_act(h2, rows(), gate, up, m);
}

Result<std::vector<double>> CalibBlock::hessian(const float* x, int64_t k) const {
  return hessian(x, rows(), k);
}

Result<std::vector<double>> CalibBlock::hessian(const float* x, int64_t n, int64_t k) const {
  return ops_->hessian(x, n, k);
}

Status CalibBlock::forward(const BlockTensors& t, float* x) const {
  const int64_t n = rows(), hidden = c_.hidden_size;
  std::vector<float> h(static_cast<size_t>(n * hidden));
  norm(x, t.attn_norm, h.data());
  std::vector<float> q(static_cast<size_t>(n * t.q.n)), k(static_cast<size_t>(n * t.k.n)),
      v(static_cast<size_t>(n * t.v.n));
  LATHE_RETURN_IF_ERROR(linear(h.data(), n, t.q, q.data()));
  LATHE_RETURN_IF_ERROR(linear(h.data(), n, t.k, k.data()));
  LATHE_RETURN_IF_ERROR(linear(h.data(), n, t.v, v.data()));
  std::vector<float> a(static_cast<size_t>(n * t.o.k));
  LATHE_RETURN_IF_ERROR(attention(t, q, k, v, a.data()));
  q = k = v = {};
  std::vector<float> y(static_cast<size_t>(n * hidden));
  LATHE_RETURN_IF_ERROR(linear(a.data(), n, t.o, y.data()));
  a = {};
  add(x, y);
  norm(x, t.ffn_norm, h.data());
  std::vector<float> m(static_cast<size_t>(n * t.down.k));
  LATHE_RETURN_IF_ERROR(mlp_act(h.data(), t.gate, t.up, m.data()));
  LATHE_RETURN_IF_ERROR(linear(m.data(), n, t.down, y.data()));
  add(x, y);
  return Status::ok();
}

void CalibBlock::add(float* x, const std::vector<float>& y) {
  float* xs = x;
  const float* ys = y.data();
  ThreadPool::global().parallel_for(static_cast<int64_t>(y.size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) xs[i] += ys[i];
  });
}

}  // namespace lathe
