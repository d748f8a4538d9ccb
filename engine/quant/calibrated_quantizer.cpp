#include "engine/quant/calibrated_quantizer.h"

#include <chrono>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "engine/core/strings.h"
#include "engine/quant/awq_search.h"
#include "engine/quant/calib_ops.h"
#include "engine/quant/gptq.h"

namespace lathe {
namespace {

Status check_cancel(const std::atomic<bool>* cancel) {
  if (cancel != nullptr && cancel->load()) return cancelled("interrupted");
  return Status();
}

// Rows [rows, k] picked evenly over the batch, at most `max_rows` of them.
std::vector<float> sample_rows(const std::vector<float>& x, int64_t rows, int64_t k,
                               int64_t max_rows) {
  const int64_t m = std::min(rows, max_rows);
  std::vector<float> out(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t r = i * rows / m;
    std::copy_n(x.begin() + r * k, k, out.begin() + i * k);
  }
  return out;
}

// x[:, j] /= s[j] over [rows, k].
void divide_columns(std::vector<float>& x, int64_t k, const std::vector<float>& s) {
  const int64_t rows = static_cast<int64_t>(x.size()) / k;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>(r * k + j)] /= s[static_cast<size_t>(j)];
}

// LATHE_GPTQ_DUMP_DIR=DIR and LATHE_GPTQ_DUMP_LAYERS=0,3 (block numbers): each GPTQ linear of
// those blocks writes DIR/blk.L.NAME.{w.f32,h.f64,x.f32,shape} (its float weights [n, k], the
// Hessian [k, k], the calibration inputs [rows, k] it was computed from (the fitted rows), and "n k
// rows") before it is quantized, for scripts/quant/gptq_real_layers.py to check against numpy.
// Nothing otherwise.
void maybe_dump_gptq_input(const std::string& prefix, const char* name, const CalibLinear& l,
                           const std::vector<double>& h, const std::vector<float>& x,
                           int64_t rows) {
  const char* dir = std::getenv("LATHE_GPTQ_DUMP_DIR");
  const char* layers = std::getenv("LATHE_GPTQ_DUMP_LAYERS");
  if (dir == nullptr || layers == nullptr) return;
  std::string list = ",", key = ",";
  list.append(layers).append(",");
  key.append(prefix, 4, prefix.size() - 5).append(",");  // "blk.3." -> ",3,"
  if (list.find(key) == std::string::npos) return;
  const std::string base = std::string(dir) + "/" + prefix + name;
  auto put = [&](const std::string& path, const void* data, size_t bytes) {
    std::ofstream(path, std::ios::binary)
        .write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  };
  put(base + ".w.f32", l.w.data(), l.w.size() * sizeof(float));
  put(base + ".h.f64", h.data(), h.size() * sizeof(double));
  put(base + ".x.f32", x.data(), static_cast<size_t>(rows * l.k) * sizeof(float));
  std::ofstream(base + ".shape") << l.n << " " << l.k << " " << rows << "\n";
}

// `buf` holding n floats: its old values are left in place (every caller overwrites all of them),
// so a buffer kept from the last block costs neither a new allocation nor its page faults.
std::vector<float>& scratch(std::vector<float>& buf, int64_t n) {
  buf.resize(static_cast<size_t>(n));
  return buf;
}

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    e += d * d;
  }
  return e;
}

}  // namespace

namespace {

std::vector<std::vector<TokenId>> concat(std::vector<std::vector<TokenId>> a,
                                         const std::vector<std::vector<TokenId>>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int64_t tokens_of(const std::vector<std::vector<TokenId>>& samples) {
  int64_t n = 0;
  for (const auto& s : samples) n += static_cast<int64_t>(s.size());
  return n;
}

}  // namespace

CalibratedQuantizer::CalibratedQuantizer(const QuantSource& source, const QuantScheme& scheme,
                                         const std::vector<std::vector<TokenId>>& fit,
                                         const std::vector<std::vector<TokenId>>& held,
                                         CalibOps& ops, const CalibratedQuantizerOptions& o)
    : source_(&source),
      ops_(&ops),
      scheme_(scheme),
      options_(o),
      layout_(make_calib_layout(concat(fit, held))),
      block_(source.config(), layout_, ops),
      fit_rows_(tokens_of(fit)),
      holdout_samples_(static_cast<int64_t>(held.size())),
      holdout_block_(source.config(), make_calib_layout(held), ops) {}

Result<CalibratedQuantizer> CalibratedQuantizer::create(const QuantSource& source,
                                                        const QuantScheme& scheme,
                                                        const CalibrationSet& calibration,
                                                        CalibOps& ops,
                                                        const CalibratedQuantizerOptions& options) {
  if (scheme.kind != QuantKind::kInt || !scheme.needs_calibration())
    return invalid_argument("the calibrated quantizer runs --scheme gptq or awq, not " +
                            scheme.name);
  if (calibration.samples.empty()) return invalid_argument("the calibration set is empty");
  if (options.holdout_samples < 0) return invalid_argument("--holdout-samples must be >= 0");
  const int64_t n = static_cast<int64_t>(calibration.samples.size());
  if (options.holdout_samples >= n)
    return invalid_argument(strformat(
        "--holdout-samples %lld leaves no calibration sample to fit (the set has %lld); pass "
        "fewer, or 0 to skip the held-out check",
        static_cast<long long>(options.holdout_samples), static_cast<long long>(n)));
  const std::vector<bool> mask = holdout_mask(n, options.holdout_samples);
  std::vector<std::vector<TokenId>> fit, held;
  for (int64_t i = 0; i < n; ++i)
    (mask[static_cast<size_t>(i)] ? held : fit)
        .push_back(calibration.samples[static_cast<size_t>(i)]);
  CalibratedQuantizer q(source, scheme, fit, held, ops, options);
  LATHE_ASSIGN_OR_RETURN(q.x_, calib_embeddings(source, concat(fit, held)));
  return q;
}

Status CalibratedQuantizer::restore(int64_t layer, std::vector<float> x) {
  const int64_t want = block_.rows() * source_->config().hidden_size;
  if (static_cast<int64_t>(x.size()) != want)
    return invalid_argument(
        strformat("the saved calibration state has %zu values, this run needs "
                  "%lld (rows x hidden)",
                  x.size(), static_cast<long long>(want)));
  if (layer < 0 || layer > source_->config().num_layers)
    return invalid_argument(strformat("the saved calibration state is for block %lld of %lld",
                                      static_cast<long long>(layer),
                                      static_cast<long long>(source_->config().num_layers)));
  x_ = std::move(x);
  next_layer_ = layer;
  return Status();
}

Result<HoldoutBlock> CalibratedQuantizer::compare_holdout(const BlockTensors& plain,
                                                          const BlockTensors& quantized,
                                                          const std::vector<float>& x_in) const {
  BlockTensors rtn = plain;
  for (CalibLinear* l : {&rtn.q, &rtn.k, &rtn.v, &rtn.o, &rtn.gate, &rtn.up, &rtn.down}) {
    LATHE_ASSIGN_OR_RETURN(IntQuantizedMatrix qm,
                           quantize_int_rtn(l->w.data(), l->n, l->k, scheme_.int_config));
    l->w = dequantize_int(qm);
  }
  std::vector<float> y_ref = x_in, y_method = x_in, y_rtn = x_in;
  LATHE_RETURN_IF_ERROR(holdout_block_.forward(plain, y_ref.data()));
  LATHE_RETURN_IF_ERROR(holdout_block_.forward(quantized, y_method.data()));
  LATHE_RETURN_IF_ERROR(holdout_block_.forward(rtn, y_rtn.data()));
  const double count = static_cast<double>(std::max<size_t>(1, y_ref.size()));
  HoldoutBlock h;
  h.method_error = squared_error(y_method, y_ref) / count;
  h.rtn_error = squared_error(y_rtn, y_ref) / count;
  return h;
}

Result<CalibratedBlock> CalibratedQuantizer::quantize_block(int64_t layer,
                                                            const std::atomic<bool>* cancel) {
  if (layer != next_layer_)
    return internal_error(
        strformat("blocks must be quantized in order: asked for %lld, next is %lld",
                  static_cast<long long>(layer), static_cast<long long>(next_layer_)));
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  Clock::time_point t0 = Clock::now();
  LATHE_ASSIGN_OR_RETURN(BlockTensors t, read_block_tensors(*source_, layer));
  if (options_.timing) options_.timing->block_read_s += since(t0);
  CalibratedBlock out;
  const std::string prefix = "blk." + std::to_string(layer) + ".";
  const int64_t hidden = source_->config().hidden_size;
  BlockTensors plain;
  std::vector<float> holdout_in;  // the held-out rows entering the block
  if (holdout_samples_ > 0) {
    plain = t;
    holdout_in.assign(x_.begin() + fit_rows_ * hidden, x_.end());
  }
  if (scheme_.method == QuantMethod::kGptq) {
    LATHE_RETURN_IF_ERROR(gptq_block(t, prefix, cancel, &out));
  } else {
    LATHE_RETURN_IF_ERROR(awq_block(t, prefix, cancel, &out));
  }
  if (holdout_samples_ > 0) {
    t0 = Clock::now();
    Result<HoldoutBlock> h = compare_holdout(plain, t, holdout_in);
    if (options_.timing) options_.timing->holdout_s += since(t0);
    if (!h.is_ok()) return h.status().with_context(prefix + "held-out check");
    out.has_holdout = true;
    out.holdout = h.value();
  }
  ++next_layer_;
  return out;
}

Status CalibratedQuantizer::attention_of(const BlockTensors& t, const std::vector<float>& h1,
                                         const std::string& prefix) {
  const int64_t rows = block_.rows();
  std::vector<float>& q = scratch(scratch_.q, rows * t.q.n);
  std::vector<float>& k = scratch(scratch_.k, rows * t.k.n);
  std::vector<float>& v = scratch(scratch_.v, rows * t.v.n);
  const std::string where = prefix + "forward";
  LATHE_RETURN_IF_ERROR(block_.linear(h1.data(), rows, t.q, q.data()).with_context(where));
  LATHE_RETURN_IF_ERROR(block_.linear(h1.data(), rows, t.k, k.data()).with_context(where));
  LATHE_RETURN_IF_ERROR(block_.linear(h1.data(), rows, t.v, v.data()).with_context(where));
  std::vector<float>& a = scratch(scratch_.a, rows * t.o.k);
  return block_.attention(t, q, k, v, a.data()).with_context(where);
}

Status CalibratedQuantizer::gptq_block(BlockTensors& t, const std::string& prefix,
                                       const std::atomic<bool>* cancel, CalibratedBlock* out) {
  const int64_t rows = block_.rows(), hidden = source_->config().hidden_size;
  GptqConfig gc;
  gc.quant = scheme_.int_config;
  gc.act_order = scheme_.desc_act;
  gc.damp_percent = scheme_.damp_percent;
  double err_sum = 0.0;
  int64_t err_count = 0;
  // Quantizes `l` (named `name`) from the Hessian `h`, then puts the dequantized weights in `l`
  // for the stages after it; `x` is its input, for the output error.
  auto quantize = [&](CalibLinear& l, const char* name, const std::vector<double>& h,
                      const std::vector<float>& x) -> Status {
    LATHE_RETURN_IF_ERROR(check_cancel(cancel));
    maybe_dump_gptq_input(prefix, name, l, h, x, fit_rows_);
    Result<GptqResult> r = ops_->gptq(l.w.data(), l.n, l.k, h, gc);
    if (!r.is_ok()) return r.status().with_context(prefix + name);
    GptqResult& g = r.value();
    if (g.fell_back_to_rtn) out->notes.push_back(prefix + name + ": " + g.fallback_reason);
    std::vector<float> deq = dequantize_int(g.q);
    // Output error on a sample of the input rows.
    const std::vector<float> xs = sample_rows(x, fit_rows_, l.k, 256);
    const int64_t m = static_cast<int64_t>(xs.size()) / l.k;
    std::vector<float> y0(static_cast<size_t>(m * l.n)), y1(y0.size());
    CalibLinear plain{l.w, {}, l.n, l.k};
    LATHE_RETURN_IF_ERROR(
        block_.linear(xs.data(), m, plain, y0.data()).with_context(prefix + name));
    l.w = std::move(deq);
    LATHE_RETURN_IF_ERROR(block_.linear(xs.data(), m, CalibLinear{l.w, {}, l.n, l.k}, y1.data())
                              .with_context(prefix + name));
    err_sum += squared_error(y1, y0);
    err_count += static_cast<int64_t>(y0.size());
    out->linears.emplace(prefix + name, std::move(g.q));
    return Status();
  };
  auto hessian_of = [&](const std::vector<float>& x, int64_t k) -> Result<std::vector<double>> {
    Result<std::vector<double>> h = block_.hessian(x.data(), fit_rows_, k);  // held-out rows out
    if (!h.is_ok()) return h.status().with_context(prefix + "Hessian");
    return h;
  };

  std::vector<float>& h1 = scratch(scratch_.h1, rows * hidden);
  block_.norm(x_.data(), t.attn_norm, h1.data());
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(h1, hidden));
    LATHE_RETURN_IF_ERROR(quantize(t.q, "attn_q", h, h1));
    LATHE_RETURN_IF_ERROR(quantize(t.k, "attn_k", h, h1));
    LATHE_RETURN_IF_ERROR(quantize(t.v, "attn_v", h, h1));
  }
  LATHE_RETURN_IF_ERROR(attention_of(t, h1, prefix));
  std::vector<float>& a = scratch_.a;
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(a, t.o.k));
    LATHE_RETURN_IF_ERROR(quantize(t.o, "attn_output", h, a));
  }
  std::vector<float>& y = scratch(scratch_.y, rows * hidden);
  LATHE_RETURN_IF_ERROR(
      block_.linear(a.data(), rows, t.o, y.data()).with_context(prefix + "forward"));
  CalibBlock::add(x_.data(), y);
  std::vector<float>& h2 = scratch(scratch_.h2, rows * hidden);
  block_.norm(x_.data(), t.ffn_norm, h2.data());
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(h2, hidden));
    LATHE_RETURN_IF_ERROR(quantize(t.gate, "ffn_gate", h, h2));
    LATHE_RETURN_IF_ERROR(quantize(t.up, "ffn_up", h, h2));
  }
  std::vector<float>& m = scratch(scratch_.m, rows * t.down.k);
  LATHE_RETURN_IF_ERROR(
      block_.mlp_act(h2.data(), t.gate, t.up, m.data()).with_context(prefix + "forward"));
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(m, t.down.k));
    LATHE_RETURN_IF_ERROR(quantize(t.down, "ffn_down", h, m));
  }
  LATHE_RETURN_IF_ERROR(
      block_.linear(m.data(), rows, t.down, y.data()).with_context(prefix + "forward"));
  CalibBlock::add(x_.data(), y);
  out->output_error = err_count > 0 ? err_sum / static_cast<double>(err_count) : 0.0;
  return Status();
}

Status CalibratedQuantizer::awq_block(BlockTensors& t, const std::string& prefix,
                                      const std::atomic<bool>* cancel, CalibratedBlock* out) {
  const int64_t rows = block_.rows(), hidden = source_->config().hidden_size;
  AwqConfig ac;
  ac.quant = scheme_.int_config;

  // The float block, with every linear's input kept.
  std::vector<float>& h1 = scratch(scratch_.h1, rows * hidden);
  block_.norm(x_.data(), t.attn_norm, h1.data());
  LATHE_RETURN_IF_ERROR(attention_of(t, h1, prefix));
  std::vector<float>& a = scratch_.a;
  std::vector<float>& y = scratch(scratch_.y, rows * hidden);
  LATHE_RETURN_IF_ERROR(
      block_.linear(a.data(), rows, t.o, y.data()).with_context(prefix + "forward"));
  CalibBlock::add(x_.data(), y);
  std::vector<float>& h2 = scratch(scratch_.h2, rows * hidden);
  block_.norm(x_.data(), t.ffn_norm, h2.data());
  std::vector<float>& m = scratch(scratch_.m, rows * t.down.k);
  LATHE_RETURN_IF_ERROR(
      block_.mlp_act(h2.data(), t.gate, t.up, m.data()).with_context(prefix + "forward"));
  LATHE_RETURN_IF_ERROR(
      block_.linear(m.data(), rows, t.down, y.data()).with_context(prefix + "forward"));
  CalibBlock::add(x_.data(), y);  // x_ is now the float block's output: the next block's input
  LATHE_RETURN_IF_ERROR(check_cancel(cancel));

  // Scale search of one group sharing the input `x` ([rows, kk]); the loss is the squared error
  // of the group's outputs on a sample of rows.
  auto search = [&](const std::vector<float>& x, std::vector<CalibLinear*> group,
                    const char* what) -> Result<std::vector<float>> {
    LATHE_RETURN_IF_ERROR(check_cancel(cancel));
    const int64_t kk = group[0]->k;
    const std::vector<float> xs = sample_rows(x, fit_rows_, kk, options_.awq_loss_rows);
    const int64_t ms = static_cast<int64_t>(xs.size()) / kk;
    std::vector<std::vector<float>> ref(group.size());
    std::vector<AwqLinear> linears;
    for (size_t i = 0; i < group.size(); ++i) {
      ref[i].resize(static_cast<size_t>(ms * group[i]->n));
      LATHE_RETURN_IF_ERROR(
          block_.linear(xs.data(), ms, CalibLinear{group[i]->w, {}, group[i]->n, kk}, ref[i].data())
              .with_context(prefix + what));
      linears.push_back({group[i]->w.data(), group[i]->n});
    }
    std::vector<float> yc;
    AwqLossFn loss = [&](const std::vector<std::vector<float>>& cand) -> Result<double> {
      double e = 0.0;
      for (size_t i = 0; i < cand.size(); ++i) {
        yc.resize(ref[i].size());
        // Its error gets the group's name below, from awq_search_scales' result.
        LATHE_RETURN_IF_ERROR(
            block_.linear(xs.data(), ms, CalibLinear{cand[i], {}, group[i]->n, kk}, yc.data()));
        e += squared_error(yc, ref[i]);
      }
      return e;
    };
    Result<AwqScaleResult> r =
        awq_search_scales(awq_activation_means(x.data(), fit_rows_, kk), linears, kk, ac, loss);
    if (!r.is_ok()) return r.status().with_context(prefix + what);
    for (CalibLinear* l : group) awq_scale_columns(l->w.data(), l->n, kk, r.value().scales.data());
    return std::move(r.value().scales);
  };

  LATHE_ASSIGN_OR_RETURN(std::vector<float> s_qkv, search(h1, {&t.q, &t.k, &t.v}, "attn_q/k/v"));
  awq_fold_into_norm(t.attn_norm.data(), nullptr, hidden, s_qkv.data());
  divide_columns(h1, hidden, s_qkv);
  out->replaced[prefix + "attn_norm"] = t.attn_norm;
  if (t.v.n == t.o.k) {  // v's outputs are o's inputs (no grouped-query sharing)
    LATHE_ASSIGN_OR_RETURN(std::vector<float> s_o, search(a, {&t.o}, "attn_output"));
    awq_fold_into_linear(t.v.w.data(), t.v.bias.empty() ? nullptr : t.v.bias.data(), t.v.n, t.v.k,
                         s_o.data());
    divide_columns(a, t.o.k, s_o);
    if (!t.v.bias.empty()) out->replaced[prefix + "attn_v_bias"] = t.v.bias;
  }
  LATHE_ASSIGN_OR_RETURN(std::vector<float> s_gu, search(h2, {&t.gate, &t.up}, "ffn_gate/up"));
  awq_fold_into_norm(t.ffn_norm.data(), nullptr, hidden, s_gu.data());
  divide_columns(h2, hidden, s_gu);
  out->replaced[prefix + "ffn_norm"] = t.ffn_norm;
  LATHE_ASSIGN_OR_RETURN(std::vector<float> s_d, search(m, {&t.down}, "ffn_down"));
  awq_fold_into_linear(t.up.w.data(), nullptr, t.up.n, t.up.k, s_d.data());
  divide_columns(m, t.down.k, s_d);

  // Clip search (not q and k: AutoAWQ leaves their ranges alone), then round to nearest.
  double err_sum = 0.0;
  int64_t err_count = 0;
  struct Item {
    CalibLinear* l;
    const char* name;
    const std::vector<float>* x;
    bool clip;
  };
  const Item items[] = {{&t.q, "attn_q", &h1, false},     {&t.k, "attn_k", &h1, false},
                        {&t.v, "attn_v", &h1, true},      {&t.o, "attn_output", &a, true},
                        {&t.gate, "ffn_gate", &h2, true}, {&t.up, "ffn_up", &h2, true},
                        {&t.down, "ffn_down", &m, true}};
  for (const Item& it : items) {
    LATHE_RETURN_IF_ERROR(check_cancel(cancel));
    CalibLinear& l = *it.l;
    const std::vector<float> xs = sample_rows(*it.x, fit_rows_, l.k, options_.awq_clip_rows);
    const int64_t ms = static_cast<int64_t>(xs.size()) / l.k;
    std::vector<float> y0(static_cast<size_t>(ms * l.n)), y1(y0.size());
    LATHE_RETURN_IF_ERROR(block_.linear(xs.data(), ms, CalibLinear{l.w, {}, l.n, l.k}, y0.data())
                              .with_context(prefix + it.name));
    if (it.clip) {
      Result<std::vector<float>> mv = awq_search_clip(l.w.data(), l.n, l.k, xs.data(), ms, ac);
      if (!mv.is_ok()) return mv.status().with_context(prefix + it.name);
      awq_apply_clip(l.w.data(), l.n, l.k, effective_group_size(ac.quant, l.k), mv.value());
    }
    Result<IntQuantizedMatrix> qm = quantize_int_rtn(l.w.data(), l.n, l.k, ac.quant);
    if (!qm.is_ok()) return qm.status().with_context(prefix + it.name);
    std::vector<float> deq = dequantize_int(qm.value());
    LATHE_RETURN_IF_ERROR(block_.linear(xs.data(), ms, CalibLinear{deq, {}, l.n, l.k}, y1.data())
                              .with_context(prefix + it.name));
    err_sum += squared_error(y1, y0);
    err_count += static_cast<int64_t>(y0.size());
    l.w = std::move(deq);  // t is now the quantized block (for the held-out check)
    out->linears.emplace(prefix + it.name, std::move(qm).value());
  }
  out->output_error = err_count > 0 ? err_sum / static_cast<double>(err_count) : 0.0;
  return Status();
}

}  // namespace lathe
