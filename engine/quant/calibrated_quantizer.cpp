#include "engine/quant/calibrated_quantizer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <tuple>

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

// `m` = min(rows, max_rows) row numbers spread evenly over [0, rows).
std::vector<int64_t> spread_rows(int64_t rows, int64_t max_rows) {
  const int64_t m = std::min(rows, max_rows);
  std::vector<int64_t> out(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) out[static_cast<size_t>(i)] = i * rows / m;
  return out;
}

// The rows of spread_rows(fit, max_rows) of each input tensor, gathered once per tensor (the
// linears sharing an input share its sample). A tensor must not change while it is cached.
class SampledRows {
 public:
  SampledRows(CalibOps& ops, int64_t fit, int64_t max_rows)
      : ops_(&ops), rows_(spread_rows(fit, max_rows)) {}
  Result<const CalibTensor*> of(const CalibTensor& x) {
    CalibTensorPtr& t = cache_[&x];
    if (t == nullptr) {
      LATHE_ASSIGN_OR_RETURN(t, ops_->gather_rows(x, rows_));
    }
    return t.get();
  }

 private:
  CalibOps* ops_;
  std::vector<int64_t> rows_;
  std::map<const CalibTensor*, CalibTensorPtr> cache_;
};

std::vector<int64_t> row_range(int64_t r0, int64_t r1) {
  std::vector<int64_t> out;
  for (int64_t r = r0; r < r1; ++r) out.push_back(r);
  return out;
}

// LATHE_GPTQ_DUMP_DIR=DIR and LATHE_GPTQ_DUMP_LAYERS=0,3 (block numbers): each GPTQ linear of
// those blocks writes DIR/blk.L.NAME.{w.f32,h.f64,x.f32,shape} (its float weights [n, k], the
// Hessian [k, k], the calibration inputs [rows, k] it was computed from (the fitted rows), and "n k
// rows") before it is quantized, for scripts/quant/gptq_real_layers.py to check against numpy.
// Nothing otherwise.
Status maybe_dump_gptq_input(CalibOps& ops, const std::string& prefix, const char* name,
                             const CalibLinear& l, const std::vector<double>& h,
                             const CalibTensor& x, int64_t rows) {
  const char* dir = std::getenv("LATHE_GPTQ_DUMP_DIR");
  const char* layers = std::getenv("LATHE_GPTQ_DUMP_LAYERS");
  if (dir == nullptr || layers == nullptr) return Status::ok();
  std::string list = ",", key = ",";
  list.append(layers).append(",");
  key.append(prefix, 4, prefix.size() - 5).append(",");  // "blk.3." -> ",3,"
  if (list.find(key) == std::string::npos) return Status::ok();
  const std::string base = std::string(dir) + "/" + prefix + name;
  auto put = [&](const std::string& path, const void* data, size_t bytes) {
    std::ofstream(path, std::ios::binary)
        .write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  };
  put(base + ".w.f32", l.w.data(), l.w.size() * sizeof(float));
  put(base + ".h.f64", h.data(), h.size() * sizeof(double));
  std::vector<float> xs(static_cast<size_t>(rows * l.k));
  LATHE_RETURN_IF_ERROR(ops.download(x, 0, rows, xs.data()));
  put(base + ".x.f32", xs.data(), xs.size() * sizeof(float));
  std::ofstream(base + ".shape") << l.n << " " << l.k << " " << rows << "\n";
  return Status::ok();
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
  LATHE_ASSIGN_OR_RETURN(const std::vector<float> x, calib_embeddings(source, concat(fit, held)));
  LATHE_ASSIGN_OR_RETURN(q.x_,
                         calib_upload(ops, x.data(), q.block_.rows(), source.config().hidden_size));
  // Every activation of a block, now: a device too small for them fails here, before any work.
  const ModelConfig& c = source.config();
  const std::pair<CalibTensorPtr*, int64_t> slots[] = {
      {&q.scratch_.h1, c.hidden_size}, {&q.scratch_.q, c.q_size()},
      {&q.scratch_.k, c.kv_size()},    {&q.scratch_.v, c.kv_size()},
      {&q.scratch_.a, c.q_size()},     {&q.scratch_.y, c.hidden_size},
      {&q.scratch_.h2, c.hidden_size}, {&q.scratch_.m, c.intermediate_size}};
  for (const auto& [slot, cols] : slots) LATHE_RETURN_IF_ERROR(q.scratch(*slot, cols).status());
  return q;
}

Result<std::vector<float>> CalibratedQuantizer::hidden_state() const {
  return calib_download(*ops_, *x_);
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
  LATHE_RETURN_IF_ERROR(ops_->upload(x.data(), *x_));
  next_layer_ = layer;
  return Status();
}

Result<CalibTensor*> CalibratedQuantizer::scratch(CalibTensorPtr& slot, int64_t cols) {
  if (slot == nullptr || slot->cols() != cols || slot->rows() != block_.rows()) {
    slot.reset();
    LATHE_ASSIGN_OR_RETURN(slot, block_.alloc(cols));
  }
  return slot.get();
}

Result<HoldoutBlock> CalibratedQuantizer::compare_holdout(const BlockTensors& plain,
                                                          const BlockTensors& quantized,
                                                          const CalibTensor& x_in) const {
  BlockTensors rtn = plain;
  for (CalibLinear* l : {&rtn.q, &rtn.k, &rtn.v, &rtn.o, &rtn.gate, &rtn.up, &rtn.down}) {
    LATHE_ASSIGN_OR_RETURN(IntQuantizedMatrix qm,
                           quantize_int_rtn(l->w.data(), l->n, l->k, scheme_.int_config));
    l->w = dequantize_int(qm);
  }
  const std::vector<int64_t> all = row_range(0, x_in.rows());
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr y_ref, ops_->gather_rows(x_in, all));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr y_method, ops_->gather_rows(x_in, all));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr y_rtn, ops_->gather_rows(x_in, all));
  LATHE_RETURN_IF_ERROR(holdout_block_.forward(plain, *y_ref));
  LATHE_RETURN_IF_ERROR(holdout_block_.forward(quantized, *y_method));
  LATHE_RETURN_IF_ERROR(holdout_block_.forward(rtn, *y_rtn));
  const double count = static_cast<double>(std::max<int64_t>(1, y_ref->size()));
  HoldoutBlock h;
  LATHE_ASSIGN_OR_RETURN(const double e_method, ops_->squared_difference(*y_method, *y_ref));
  LATHE_ASSIGN_OR_RETURN(const double e_rtn, ops_->squared_difference(*y_rtn, *y_ref));
  h.method_error = e_method / count;
  h.rtn_error = e_rtn / count;
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
  BlockTensors plain;
  CalibTensorPtr holdout_in;  // the held-out rows entering the block
  if (holdout_samples_ > 0) {
    plain = t;
    LATHE_ASSIGN_OR_RETURN(holdout_in, ops_->gather_rows(*x_, row_range(fit_rows_, block_.rows())));
  }
  if (scheme_.method == QuantMethod::kGptq) {
    LATHE_RETURN_IF_ERROR(gptq_block(t, prefix, cancel, &out));
  } else {
    LATHE_RETURN_IF_ERROR(awq_block(t, prefix, cancel, &out));
  }
  if (holdout_samples_ > 0) {
    t0 = Clock::now();
    Result<HoldoutBlock> h = compare_holdout(plain, t, *holdout_in);
    if (options_.timing) options_.timing->holdout_s += since(t0);
    if (!h.is_ok()) return h.status().with_context(prefix + "held-out check");
    out.has_holdout = true;
    out.holdout = h.value();
  }
  ++next_layer_;
  return out;
}

Status CalibratedQuantizer::attention_of(const BlockTensors& t, const CalibTensor& h1,
                                         const std::string& prefix) {
  const std::string where = prefix + "forward";
  auto ctx = [&](Status s) { return s.with_context(where); };
  LATHE_ASSIGN_OR_RETURN(CalibTensor * q, scratch(scratch_.q, t.q.n));
  LATHE_ASSIGN_OR_RETURN(CalibTensor * k, scratch(scratch_.k, t.k.n));
  LATHE_ASSIGN_OR_RETURN(CalibTensor * v, scratch(scratch_.v, t.v.n));
  LATHE_ASSIGN_OR_RETURN(CalibTensor * a, scratch(scratch_.a, t.o.k));
  LATHE_RETURN_IF_ERROR(ctx(block_.linear(h1, t.q, *q)));
  LATHE_RETURN_IF_ERROR(ctx(block_.linear(h1, t.k, *k)));
  LATHE_RETURN_IF_ERROR(ctx(block_.linear(h1, t.v, *v)));
  return ctx(block_.attention(t, *q, *k, *v, *a));
}

Result<double> CalibratedQuantizer::output_error(const CalibTensor& xs, const CalibLinear& before,
                                                 const CalibLinear& after) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr y0, ops_->alloc(xs.rows(), before.n));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr y1, ops_->alloc(xs.rows(), after.n));
  LATHE_RETURN_IF_ERROR(ops_->linear(xs, before, *y0));
  LATHE_RETURN_IF_ERROR(ops_->linear(xs, after, *y1));
  return ops_->squared_difference(*y1, *y0);
}

Status CalibratedQuantizer::gptq_block(BlockTensors& t, const std::string& prefix,
                                       const std::atomic<bool>* cancel, CalibratedBlock* out) {
  const int64_t hidden = source_->config().hidden_size;
  GptqConfig gc;
  gc.quant = scheme_.int_config;
  gc.act_order = scheme_.desc_act;
  gc.damp_percent = scheme_.damp_percent;
  double err_sum = 0.0;
  int64_t err_count = 0;
  SampledRows sampled(*ops_, fit_rows_, 256);
  // Quantizes `l` (named `name`) from the Hessian `h`, then puts the dequantized weights in `l`
  // for the stages after it; `x` is its input, for the output error.
  auto quantize = [&](CalibLinear& l, const char* name, const std::vector<double>& h,
                      const CalibTensor& x) -> Status {
    LATHE_RETURN_IF_ERROR(check_cancel(cancel));
    LATHE_RETURN_IF_ERROR(maybe_dump_gptq_input(*ops_, prefix, name, l, h, x, fit_rows_));
    Result<GptqResult> r = ops_->gptq(l.w.data(), l.n, l.k, h, gc);
    if (!r.is_ok()) return r.status().with_context(prefix + name);
    GptqResult& g = r.value();
    if (g.fell_back_to_rtn) out->notes.push_back(prefix + name + ": " + g.fallback_reason);
    // Output error on a sample of the input rows (both with l's bias, which cancels).
    CalibLinear deq{dequantize_int(g.q), l.bias, l.n, l.k};
    Result<const CalibTensor*> xs = sampled.of(x);
    if (!xs.is_ok()) return xs.status().with_context(prefix + name);
    Result<double> e = output_error(*xs.value(), l, deq);
    if (!e.is_ok()) return e.status().with_context(prefix + name);
    err_sum += e.value();
    err_count += xs.value()->rows() * l.n;
    l.w = std::move(deq.w);
    out->linears.emplace(prefix + name, std::move(g.q));
    return Status();
  };
  auto hessian_of = [&](const CalibTensor& x) -> Result<std::vector<double>> {
    Result<std::vector<double>> h = block_.hessian(x, fit_rows_);  // held-out rows out
    if (!h.is_ok()) return h.status().with_context(prefix + "Hessian");
    return h;
  };
  auto fwd = [&](Status s) { return s.with_context(prefix + "forward"); };

  LATHE_ASSIGN_OR_RETURN(CalibTensor * h1, scratch(scratch_.h1, hidden));
  LATHE_RETURN_IF_ERROR(fwd(block_.norm(*x_, t.attn_norm, *h1)));
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(*h1));
    LATHE_RETURN_IF_ERROR(quantize(t.q, "attn_q", h, *h1));
    LATHE_RETURN_IF_ERROR(quantize(t.k, "attn_k", h, *h1));
    LATHE_RETURN_IF_ERROR(quantize(t.v, "attn_v", h, *h1));
  }
  LATHE_RETURN_IF_ERROR(attention_of(t, *h1, prefix));
  CalibTensor& a = *scratch_.a;
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(a));
    LATHE_RETURN_IF_ERROR(quantize(t.o, "attn_output", h, a));
  }
  LATHE_ASSIGN_OR_RETURN(CalibTensor * y, scratch(scratch_.y, hidden));
  LATHE_RETURN_IF_ERROR(fwd(block_.linear(a, t.o, *y)));
  LATHE_RETURN_IF_ERROR(fwd(ops_->add(*x_, *y)));
  LATHE_ASSIGN_OR_RETURN(CalibTensor * h2, scratch(scratch_.h2, hidden));
  LATHE_RETURN_IF_ERROR(fwd(block_.norm(*x_, t.ffn_norm, *h2)));
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(*h2));
    LATHE_RETURN_IF_ERROR(quantize(t.gate, "ffn_gate", h, *h2));
    LATHE_RETURN_IF_ERROR(quantize(t.up, "ffn_up", h, *h2));
  }
  LATHE_ASSIGN_OR_RETURN(CalibTensor * m, scratch(scratch_.m, t.down.k));
  LATHE_RETURN_IF_ERROR(fwd(block_.mlp_act(*h2, t.gate, t.up, *m)));
  {
    LATHE_ASSIGN_OR_RETURN(std::vector<double> h, hessian_of(*m));
    LATHE_RETURN_IF_ERROR(quantize(t.down, "ffn_down", h, *m));
  }
  LATHE_RETURN_IF_ERROR(fwd(block_.linear(*m, t.down, *y)));
  LATHE_RETURN_IF_ERROR(fwd(ops_->add(*x_, *y)));
  out->output_error = err_count > 0 ? err_sum / static_cast<double>(err_count) : 0.0;
  return Status();
}

Status CalibratedQuantizer::awq_block(BlockTensors& t, const std::string& prefix,
                                      const std::atomic<bool>* cancel, CalibratedBlock* out) {
  const int64_t hidden = source_->config().hidden_size;
  AwqConfig ac;
  ac.quant = scheme_.int_config;
  auto fwd = [&](Status s) { return s.with_context(prefix + "forward"); };

  // The float block, with every linear's input kept.
  LATHE_ASSIGN_OR_RETURN(CalibTensor * h1, scratch(scratch_.h1, hidden));
  LATHE_RETURN_IF_ERROR(fwd(block_.norm(*x_, t.attn_norm, *h1)));
  LATHE_RETURN_IF_ERROR(attention_of(t, *h1, prefix));
  CalibTensor& a = *scratch_.a;
  LATHE_ASSIGN_OR_RETURN(CalibTensor * y, scratch(scratch_.y, hidden));
  LATHE_RETURN_IF_ERROR(fwd(block_.linear(a, t.o, *y)));
  LATHE_RETURN_IF_ERROR(fwd(ops_->add(*x_, *y)));
  LATHE_ASSIGN_OR_RETURN(CalibTensor * h2, scratch(scratch_.h2, hidden));
  LATHE_RETURN_IF_ERROR(fwd(block_.norm(*x_, t.ffn_norm, *h2)));
  LATHE_ASSIGN_OR_RETURN(CalibTensor * m, scratch(scratch_.m, t.down.k));
  LATHE_RETURN_IF_ERROR(fwd(block_.mlp_act(*h2, t.gate, t.up, *m)));
  LATHE_RETURN_IF_ERROR(fwd(block_.linear(*m, t.down, *y)));
  // x_ is now the float block's output: the next block's input
  LATHE_RETURN_IF_ERROR(fwd(ops_->add(*x_, *y)));
  LATHE_RETURN_IF_ERROR(check_cancel(cancel));

  // Scale search of one group sharing the input `x` ([rows, kk]); the loss is the squared error
  // of the group's outputs on a sample of rows.
  auto search = [&](CalibTensor& x, std::vector<CalibLinear*> group,
                    const char* what) -> Result<std::vector<float>> {
    LATHE_RETURN_IF_ERROR(check_cancel(cancel));
    auto ctx = [&](Status s) { return s.with_context(prefix + what); };
    const int64_t kk = group[0]->k;
    Result<CalibTensorPtr> xs_r =
        ops_->gather_rows(x, spread_rows(fit_rows_, options_.awq_loss_rows));
    if (!xs_r.is_ok()) return ctx(xs_r.status());
    const CalibTensor& xs = *xs_r.value();
    // Each linear's weights, its float outputs and a candidate's, on the ops' memory for the
    // whole grid.
    std::vector<CalibTensorPtr> w(group.size()), cand(group.size()), ref(group.size()),
        yc(group.size());
    std::vector<AwqLinear> linears;
    for (size_t i = 0; i < group.size(); ++i) {
      const CalibLinear& l = *group[i];
      Result<CalibTensorPtr> r = calib_upload(*ops_, l.w.data(), l.n, kk);
      if (!r.is_ok()) return ctx(r.status());
      w[i] = std::move(r).value();
      const std::tuple<CalibTensorPtr*, int64_t, int64_t> shapes[] = {
          {&cand[i], l.n, kk}, {&ref[i], xs.rows(), l.n}, {&yc[i], xs.rows(), l.n}};
      for (const auto& [t, rows, cols] : shapes) {
        r = ops_->alloc(rows, cols);
        if (!r.is_ok()) return ctx(r.status());
        *t = std::move(r).value();
      }
      LATHE_RETURN_IF_ERROR(ctx(ops_->linear_t(xs, *w[i], *ref[i])));
      linears.push_back({l.w.data(), l.n});
    }
    AwqScaleLossFn loss = [&](const std::vector<float>& sc) -> Result<double> {
      double e = 0.0;
      for (size_t i = 0; i < group.size(); ++i) {
        // Its error gets the group's name below, from the search's result.
        LATHE_RETURN_IF_ERROR(ops_->awq_fake_quantize(*w[i], sc, ac.quant, *cand[i]));
        LATHE_RETURN_IF_ERROR(ops_->linear_t(xs, *cand[i], *yc[i]));
        LATHE_ASSIGN_OR_RETURN(const double d, ops_->squared_difference(*yc[i], *ref[i]));
        e += d;
      }
      return e;
    };
    Result<std::vector<float>> means = ops_->column_abs_mean(x, fit_rows_);
    if (!means.is_ok()) return ctx(means.status());
    const std::vector<double> w_mean =
        awq_weight_means(linears, kk, effective_group_size(ac.quant, kk));
    Result<AwqScaleResult> r = awq_search_scale_grid(means.value(), w_mean, kk, ac, loss);
    if (!r.is_ok()) return ctx(r.status());
    for (CalibLinear* l : group) awq_scale_columns(l->w.data(), l->n, kk, r.value().scales.data());
    LATHE_RETURN_IF_ERROR(ctx(ops_->divide_columns(x, r.value().scales)));
    return std::move(r.value().scales);
  };

  LATHE_ASSIGN_OR_RETURN(std::vector<float> s_qkv, search(*h1, {&t.q, &t.k, &t.v}, "attn_q/k/v"));
  awq_fold_into_norm(t.attn_norm.data(), nullptr, hidden, s_qkv.data());
  out->replaced[prefix + "attn_norm"] = t.attn_norm;
  if (t.v.n == t.o.k) {  // v's outputs are o's inputs (no grouped-query sharing)
    LATHE_ASSIGN_OR_RETURN(std::vector<float> s_o, search(a, {&t.o}, "attn_output"));
    awq_fold_into_linear(t.v.w.data(), t.v.bias.empty() ? nullptr : t.v.bias.data(), t.v.n, t.v.k,
                         s_o.data());
    if (!t.v.bias.empty()) out->replaced[prefix + "attn_v_bias"] = t.v.bias;
  }
  LATHE_ASSIGN_OR_RETURN(std::vector<float> s_gu, search(*h2, {&t.gate, &t.up}, "ffn_gate/up"));
  awq_fold_into_norm(t.ffn_norm.data(), nullptr, hidden, s_gu.data());
  out->replaced[prefix + "ffn_norm"] = t.ffn_norm;
  LATHE_ASSIGN_OR_RETURN(std::vector<float> s_d, search(*m, {&t.down}, "ffn_down"));
  awq_fold_into_linear(t.up.w.data(), nullptr, t.up.n, t.up.k, s_d.data());

  // Clip search (not q and k: AutoAWQ leaves their ranges alone), then round to nearest.
  double err_sum = 0.0;
  int64_t err_count = 0;
  SampledRows sampled(*ops_, fit_rows_, options_.awq_clip_rows);  // the scaled inputs
  struct Item {
    CalibLinear* l;
    const char* name;
    const CalibTensor* x;
    bool clip;
  };
  const Item items[] = {{&t.q, "attn_q", h1, false},     {&t.k, "attn_k", h1, false},
                        {&t.v, "attn_v", h1, true},      {&t.o, "attn_output", &a, true},
                        {&t.gate, "ffn_gate", h2, true}, {&t.up, "ffn_up", h2, true},
                        {&t.down, "ffn_down", m, true}};
  for (const Item& it : items) {
    LATHE_RETURN_IF_ERROR(check_cancel(cancel));
    auto ctx = [&](Status s) { return s.with_context(prefix + it.name); };
    CalibLinear& l = *it.l;
    Result<const CalibTensor*> xs = sampled.of(*it.x);
    if (!xs.is_ok()) return ctx(xs.status());
    const int64_t ms = xs.value()->rows();
    const CalibLinear before{l.w, {}, l.n, l.k};  // l.w is clipped below
    if (it.clip) {
      Result<CalibTensorPtr> wt = calib_upload(*ops_, l.w.data(), l.n, l.k);
      if (!wt.is_ok()) return ctx(wt.status());
      Result<std::vector<float>> mv = ops_->awq_clip(*wt.value(), *xs.value(), ac);
      if (!mv.is_ok()) return ctx(mv.status());
      awq_apply_clip(l.w.data(), l.n, l.k, effective_group_size(ac.quant, l.k), mv.value());
    }
    Result<IntQuantizedMatrix> qm = quantize_int_rtn(l.w.data(), l.n, l.k, ac.quant);
    if (!qm.is_ok()) return ctx(qm.status());
    CalibLinear deq{dequantize_int(qm.value()), {}, l.n, l.k};
    Result<double> e = output_error(*xs.value(), before, deq);
    if (!e.is_ok()) return ctx(e.status());
    err_sum += e.value();
    err_count += ms * l.n;
    l.w = std::move(deq.w);  // t is now the quantized block (for the held-out check)
    out->linears.emplace(prefix + it.name, std::move(qm).value());
  }
  out->output_error = err_count > 0 ? err_sum / static_cast<double>(err_count) : 0.0;
  return Status();
}

}  // namespace lathe
