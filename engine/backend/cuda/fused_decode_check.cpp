// The load-time check of the fused batch-1..4 decode path against the unfused one, one layer at a
// time from identical inputs (fused_decode_check.h says why and how).
#include "engine/backend/cuda/fused_decode_check.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/fused_decode_tuner.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/step_upload.h"
#include "engine/core/half.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

std::mutex& hooks_mutex() {
  static std::mutex m;
  return m;
}

FusedDecodeTestHooks& hooks_storage() {
  static FusedDecodeTestHooks hooks;
  return hooks;
}

double norm_ratio(double num, double den) {
  if (den > 0) return std::sqrt(num / den);
  return num > 0 ? INFINITY : 0.0;
}

std::vector<float> widen(DType dt, const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = dt == DType::kBF16 ? bf16_to_f32(v[i]) : f16_to_f32(v[i]);
  return out;
}

}  // namespace

double fused_relative_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return norm_ratio(num, den);
}

double fused_update_error(const float* fused, const float* unfused, const float* input, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(fused[i]) || !std::isfinite(unfused[i]) || !std::isfinite(input[i]))
      return INFINITY;
    const double d = static_cast<double>(fused[i]) - unfused[i];
    const double u = static_cast<double>(unfused[i]) - input[i];
    num += d * d;
    den += u * u;
  }
  return norm_ratio(num, den);
}

std::string FusedParts::name() const {
  std::string s;
  auto add = [&](bool on, const char* part) {
    if (!on) return;
    if (!s.empty()) s += '+';
    s += part;
  };
  add(qkv, "qkv");
  add(o, "o");
  add(gate_up, "gate_up");
  add(down, "down");
  return s.empty() ? std::string("none") : s;
}

const std::array<FusedParts, 9>& fused_part_sets() {
  // {qkv, o, gate_up, down}: down x qkv in {-, down, qkv+down} times o x gate_up in {-, o,
  // o+gate_up}.
  static const std::array<FusedParts, 9> sets = {{
      {false, false, false, false},
      {false, true, false, false},
      {false, true, true, false},
      {false, false, false, true},
      {false, true, false, true},
      {false, true, true, true},
      {true, false, false, true},
      {true, true, false, true},
      {true, true, true, true},
  }};
  return sets;
}

void set_fused_decode_test_hooks(const FusedDecodeTestHooks& hooks) {
  std::lock_guard<std::mutex> lock(hooks_mutex());
  hooks_storage() = hooks;
}

FusedDecodeTestHooks fused_decode_test_hooks() {
  std::lock_guard<std::mutex> lock(hooks_mutex());
  return hooks_storage();
}

Status FusedDecodeTuner::check() {
  int32_t max_m = 0;
  for (const FusedDecodeChoice& ch : report_)
    if (ch.use) max_m = std::max(max_m, static_cast<int32_t>(ch.m));
  if (max_m == 0) return Status();
  const ModelConfig& c = model_.config();
  const int32_t max_model_len = model_.options().max_model_len;
  // The context's prefill fits the step budget; the checked tokens fit max-model-len.
  const int32_t context =
      std::max(0, std::min({kFusedCheckContext, limits_.max_tokens, max_model_len - max_m}));
  const int32_t blocks = static_cast<int32_t>(ceil_div(context + max_m, limits_.block_size));
  // A scratch cache of its own: nothing the check writes is seen by a step that serves.
  const Status st = run_checks(context, blocks);
  const cudaError_t synced = cudaStreamSynchronize(model_.stream());
  kv_.reset();
  LATHE_RETURN_IF_ERROR(st);
  if (synced != cudaSuccess)
    return cuda_error(synced, "cudaStreamSynchronize (fused decode check)");

  for (FusedDecodeChoice& ch : report_) {
    if (!ch.use) {
      choices_[static_cast<size_t>(ch.m)] = ch;
      continue;
    }
    const FusedDecodeCheck& k = ch.check;
    const std::string lm = ch.lm_head ? strformat("%.2g", k.lm_head_err) : std::string("not fused");
    const std::string figures = strformat(
        "worst layer output %.2g (layer %d), K/V %.2g (layer %d), LM head %s; whole step %.2g",
        k.layer_err, k.layer, k.kv_err, k.kv_layer, lm.c_str(), k.step_err);
    const std::string what = strformat(
        "the fused batch-%lld decode path (%s) against the unfused one, layer by layer from "
        "identical inputs (%d context positions; relative errors, tolerance %.0e: %s, the last "
        "for information only: bf16 rounding compounds over %lld layers)",
        static_cast<long long>(ch.m), ch.parts.name().c_str(), k.context, kFusedLayerTolerance,
        figures.c_str(), static_cast<long long>(c.num_layers));
    if (k.passed()) {
      ch.note = (ch.steps.empty() ? std::string() : "step " + ch.steps + "; ") +
                "checked per layer: " + figures;
      log_info("CUDA: checked " + what + ": agree");
    } else {
      if (forced_)
        return internal_error("disagreement of " + what + ", and LATHE_CUDA_FUSED=1 forces it");
      log_warning("CUDA: disagreement of " + what + "; using the unfused path");
      ch.use = false;
      ch.note = "failed the per-layer check against the unfused path: " + figures;
    }
    choices_[static_cast<size_t>(ch.m)] = ch;
  }
  return Status();
}

Status FusedDecodeTuner::run_checks(int32_t context, int32_t blocks) {
  const ModelConfig& c = model_.config();
  cudaStream_t stream = model_.stream();
  LATHE_RETURN_IF_ERROR(kv_.allocate(model_.kv_layout(blocks, limits_.block_size),
                                     "fused decode check KV blocks", stream));
  limits_.num_blocks = blocks;
  const int64_t bytes = kv_.layout().bytes();
  // Step buffers for the context's prefill and the checked steps (no sampling rows).
  const int64_t step_bytes_needed =
      StepLayout::make(limits_.max_tokens, limits_.max_seqs).fixed_bytes +
      4 * (int64_t{limits_.max_seqs} * blocks + blocks) + 64;
  LATHE_RETURN_IF_ERROR(dev_.allocate(step_bytes_needed, "fused decode check step inputs"));
  LATHE_RETURN_IF_ERROR(host_.allocate(step_bytes_needed, "fused decode check step inputs (host)"));
  if (context > 0) {
    // The context: one sequence of `context` tokens prefilled (unfused) writes K/V of every layer.
    ModelInput in;
    in.query_start = {0, context};
    for (int32_t p = 0; p < context; ++p) {
      in.token_ids.push_back(static_cast<TokenId>((int64_t{p} * 7919 + 13) % c.vocab_size));
      in.positions.push_back(p);
      in.slot_mapping.push_back(p);
    }
    in.seq_lens.push_back(context);
    in.max_blocks_per_seq = blocks;
    for (int32_t b = 0; b < blocks; ++b) in.block_tables.push_back(b);
    in.max_seq_len = context;
    in.max_query_len = context;
    const std::array<FusedDecodeChoice, kDecodeGemvMaxM + 1> none{};
    const std::array<FusedDecodeChoice, kDecodeGemvMaxM + 1> saved = choices_;
    model_.set_fused_choices(none);  // the context is prefilled unfused
    const Status s = model_.run_eager(in, limits_, host_, dev_, &packed_, kv_, nullptr);
    model_.set_fused_choices(saved);
    LATHE_RETURN_IF_ERROR(s);
  }
  DeviceBuffer context_kv, rows;
  LATHE_RETURN_IF_ERROR(context_kv.allocate(bytes, "fused decode check KV copy"));
  LATHE_CUDA_TRY(cudaMemcpyAsync(context_kv.get(), kv_.buffer().get(), static_cast<size_t>(bytes),
                                 cudaMemcpyDeviceToDevice, stream));
  LATHE_RETURN_IF_ERROR(
      rows.allocate(int64_t{kDecodeGemvMaxM} * c.hidden_size * 4, "fused decode check rows"));
  for (FusedDecodeChoice& ch : report_) {
    if (!ch.use) continue;
    if (!forced_ && !hooks_.assume_fused_faster) {
      LATHE_RETURN_IF_ERROR(choose_parts(&ch, context, blocks));
      if (!ch.use) continue;
    }
    LATHE_ASSIGN_OR_RETURN(ch.check, check_at(ch, context, blocks, context_kv, rows));
  }
  return Status();
}

Result<ForwardStep> FusedDecodeTuner::pack_check_step(int32_t m, int32_t context, int32_t blocks) {
  const ModelConfig& c = model_.config();
  // m one-token sequences at positions context + s over the context's blocks; sequence s also
  // sees the tokens of the sequences before it (written in the same step, before attention).
  ModelInput in;
  for (int32_t s = 0; s < m; ++s) {
    const int32_t pos = context + s;
    in.token_ids.push_back(static_cast<TokenId>((int64_t{s} * 7919 + 11) % c.vocab_size));
    in.positions.push_back(pos);
    in.slot_mapping.push_back(pos);
    in.query_start.push_back(s);
    in.seq_lens.push_back(pos + 1);
    for (int32_t b = 0; b < blocks; ++b) in.block_tables.push_back(b);
  }
  in.query_start.push_back(m);
  in.max_blocks_per_seq = blocks;
  in.max_seq_len = context + m;
  in.max_query_len = 1;
  LATHE_RETURN_IF_ERROR(upload_step(in, limits_, 0, true, host_, dev_, &packed_, model_.stream()));
  ForwardStep step;
  step.d = StepArrays::at(dev_.get(), packed_.layout);
  step.num_tokens = m;
  step.num_seqs = m;
  step.num_lm_rows = m;
  step.path = AttnPath::kDecode;
  step.splits = model_.splits_for(AttnPath::kDecode, m);
  return step;
}

Result<FusedDecodeCheck> FusedDecodeTuner::check_at(const FusedDecodeChoice& ch, int32_t context,
                                                    int32_t blocks, const DeviceBuffer& context_kv,
                                                    const DeviceBuffer& rows) {
  const ModelConfig& c = model_.config();
  const DType dt = model_.options().dtype;
  const Activations& act = model_.activations();
  cudaStream_t stream = model_.stream();
  const int32_t m = static_cast<int32_t>(ch.m);
  const int64_t h = c.hidden_size, kv_row = c.num_kv_heads * c.head_dim;
  const int64_t e = kv_.layout().elem_bytes();
  const size_t n_res = static_cast<size_t>(m * h), n_kv = static_cast<size_t>(m * kv_row);
  const size_t n_logits = static_cast<size_t>(m * c.vocab_size);
  LATHE_ASSIGN_OR_RETURN(const ForwardStep step, pack_check_step(m, context, blocks));
  auto restore_kv = [&]() -> Status {
    LATHE_CUDA_TRY(cudaMemcpyAsync(kv_.buffer().get(), context_kv.get(),
                                   static_cast<size_t>(context_kv.bytes()),
                                   cudaMemcpyDeviceToDevice, stream));
    return Status();
  };
  auto set_residual = [&]() -> Status {  // the rows every run of this layer starts from
    LATHE_CUDA_TRY(cudaMemcpyAsync(act.residual.get(), rows.get(), n_res * 4,
                                   cudaMemcpyDeviceToDevice, stream));
    return Status();
  };
  auto download = [&](void* dst, const void* src, size_t bytes) -> Status {
    LATHE_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    return Status();
  };

  FusedDecodeCheck r;
  r.done = true;
  r.context = context;
  std::vector<float> input(n_res), out_f(n_res), out_u(n_res);
  std::vector<uint16_t> k_f(n_kv), v_f(n_kv), k_u(n_kv), v_u(n_kv);
  LATHE_RETURN_IF_ERROR(model_.embed(step, nullptr));
  LATHE_CUDA_TRY(
      cudaMemcpyAsync(rows.get(), act.residual.get(), n_res * 4, cudaMemcpyDeviceToDevice, stream));
  LATHE_RETURN_IF_ERROR(download(input.data(), rows.get(), n_res * 4));
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const DeviceLayer& L = model_.weights().layers[static_cast<size_t>(li)];
    const KvLayerView view = kv_.layer(li);
    const uint8_t* k_rows = static_cast<const uint8_t*>(view.k) + context * kv_row * e;
    const uint8_t* v_rows = static_cast<const uint8_t*>(view.v) + context * kv_row * e;
    for (const bool fused : {true, false}) {
      LATHE_RETURN_IF_ERROR(restore_kv());
      LATHE_RETURN_IF_ERROR(set_residual());
      bool pending = false;
      LATHE_RETURN_IF_ERROR(model_.layer(step, kv_, li, fused ? &ch : nullptr, &pending, nullptr));
      if (!fused || !ch.parts.down) {
        // An unfused down projection is left pending: add it as the next norm does.
        LATHE_RETURN_IF_ERROR(add_rms_norm(model_.norm_args(L.ffn_norm, true, m), stream));
      }
      LATHE_RETURN_IF_ERROR(
          download((fused ? out_f : out_u).data(), act.residual.get(), n_res * 4));
      LATHE_RETURN_IF_ERROR(download((fused ? k_f : k_u).data(), k_rows, n_kv * 2));
      LATHE_RETURN_IF_ERROR(download((fused ? v_f : v_u).data(), v_rows, n_kv * 2));
    }
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
    const double layer_err = fused_update_error(out_f.data(), out_u.data(), input.data(), n_res);
    const std::vector<float> kf = widen(dt, k_f), ku = widen(dt, k_u);
    const std::vector<float> vf = widen(dt, v_f), vu = widen(dt, v_u);
    const double kv_err = std::max(fused_relative_error(kf.data(), ku.data(), n_kv),
                                   fused_relative_error(vf.data(), vu.data(), n_kv));
    if (r.layer < 0 || layer_err > r.layer_err)
      r.layer_err = layer_err, r.layer = static_cast<int32_t>(li);
    if (r.kv_layer < 0 || kv_err > r.kv_err)
      r.kv_err = kv_err, r.kv_layer = static_cast<int32_t>(li);
    // The next layer starts from the unfused output (the residual stream holds it).
    LATHE_CUDA_TRY(cudaMemcpyAsync(rows.get(), act.residual.get(), n_res * 4,
                                   cudaMemcpyDeviceToDevice, stream));
    input.swap(out_u);
  }

  std::vector<float> logits_f(n_logits), logits_u(n_logits);
  if (ch.lm_head && ch.parts.down) {
    // The final norm and the LM head from the last layer's (unfused) output.
    for (const bool fused : {true, false}) {
      LATHE_RETURN_IF_ERROR(set_residual());
      LATHE_RETURN_IF_ERROR(model_.final_logits(step, fused ? &ch : nullptr, false, nullptr));
      LATHE_RETURN_IF_ERROR(
          download((fused ? logits_f : logits_u).data(), act.logits.get(), n_logits * 4));
    }
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
    r.lm_head_err = fused_relative_error(logits_f.data(), logits_u.data(), n_logits);
  }
  // A whole decode step both ways, for information.
  for (const bool fused : {true, false}) {
    LATHE_RETURN_IF_ERROR(restore_kv());
    LATHE_RETURN_IF_ERROR(model_.forward_with(step, kv_, fused ? &ch : nullptr, nullptr));
    LATHE_RETURN_IF_ERROR(
        download((fused ? logits_f : logits_u).data(), act.logits.get(), n_logits * 4));
  }
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
  r.step_err = fused_relative_error(logits_f.data(), logits_u.data(), n_logits);
  return r;
}

}  // namespace lathe::cuda
