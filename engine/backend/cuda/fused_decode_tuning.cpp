// FusedDecodeTuner's timing (fused_decode_tuner.h): the fused kernels of decode_gemv.h timed alone
// on layer 0's weights (their launch shapes, RoPE and LM-head options), then whole decode steps as
// CUDA graphs for every valid set of fused projections (choose_parts); the fastest set is checked
// layer by layer against the unfused path (fused_decode_check.cpp) before it serves.
#include <algorithm>
#include <array>
#include <vector>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/fused_decode_tuner.h"
#include "engine/backend/cuda/launch_timer.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/backend/cuda/swiglu.h"
#include "engine/core/strings.h"

namespace lathe::cuda {

FusedDecodeTuner::FusedDecodeTuner(CudaModel& model, const StepLimits& limits,
                                   const CudaKvCache& timing_kv, bool enforce_eager)
    : model_(model),
      limits_(limits),
      timing_kv_(timing_kv),
      enforce_eager_(enforce_eager),
      forced_(model.options().switches.fused == FusedDecodeMode::kForce),
      hooks_(fused_decode_test_hooks()) {}

Status FusedDecodeTuner::run(void* x_scratch, void* y_scratch) {
  choices_.fill(FusedDecodeChoice{});
  report_.clear();
  model_.set_fused_choices(choices_);
  if (model_.options().switches.fused == FusedDecodeMode::kOff) return Status();
  std::string why;
  if (!model_.fused_decode_supported(&why)) {
    FusedDecodeChoice ch;
    ch.m = 1;
    ch.note = why;
    report_.push_back(ch);
    return Status();
  }
  LATHE_RETURN_IF_ERROR(tune(x_scratch, y_scratch));
  model_.set_fused_choices(choices_);
  LATHE_RETURN_IF_ERROR(check());
  model_.set_fused_choices(choices_);
  return Status();
}

Status FusedDecodeTuner::tune(void* x_scratch, void* y_scratch) {
  const ModelConfig& c = model_.config();
  const DType dt = model_.options().dtype;
  const DeviceLayer& L = model_.weights().layers[0];
  const Activations& act = model_.activations();
  const LinearDispatcher& linear = model_.linear();
  cudaStream_t stream = model_.stream();
  const int64_t h = c.hidden_size, qd = c.q_size(), ffn = c.intermediate_size;
  const int64_t qkv_dim = c.q_size() + 2 * c.kv_size();
  const float eps = model_.plan().rms_norm_eps;
  const int64_t max_m = std::min<int64_t>({kDecodeGemvMaxM, limits_.max_tokens, limits_.max_seqs});
  // LATHE_CUDA_FUSED=1 (and a test hook) take the fused path wherever it fits, timed or not.
  const bool prefer = forced_ || hooks_.assume_fused_faster;
  const bool qk_norm = model_.plan().has(OpKind::kQkNorm);
  // Inputs that are never zeros: residual rows, the projection output the unfused norm adds, the
  // gate/up activations; x_scratch holds 0.01 from the linear autotune.
  DeviceBuffer res_out, rope_in;  // rope_in: positions (int32) at 0, slots (int64) at byte 64
  LATHE_RETURN_IF_ERROR(res_out.allocate(kDecodeGemvMaxM * h * 4, "fused decode tuning"));
  LATHE_RETURN_IF_ERROR(rope_in.allocate(128, "fused decode tuning"));
  LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, act.residual.get(), max_m * h, 0.5f, stream));
  LATHE_RETURN_IF_ERROR(constant_fill(DType::kF32, res_out.get(), max_m * h, 0.5f, stream));
  LATHE_RETURN_IF_ERROR(constant_fill(dt, act.proj_out.get(), max_m * h, 0.01f, stream));
  LATHE_RETURN_IF_ERROR(constant_fill(dt, act.gate_up.get(), max_m * 2 * ffn, 0.01f, stream));

  auto best_linear_us = [&](int64_t n, int64_t k, int64_t m) {
    double best = 1e30;
    for (const LinearTiming& t : linear.timings())
      if (t.n == n && t.k == k && t.m == m) best = std::min(t.gemv_us, t.cublas_us);
    return best;
  };
  for (int64_t m = 1; m <= max_m; ++m) {
    FusedDecodeChoice ch;
    ch.m = m;
    const int smem = model_.props().max_smem_optin;
    if (!decode_gemv_fits(m, h, smem) || !decode_gemv_fits(m, qd, smem) ||
        !decode_gemv_fits(m, ffn, smem)) {
      ch.note = "shape not taken by decode_gemv (k % 8, or x over the shared memory)";
      report_.push_back(ch);
      continue;
    }
    // The five calls forward() makes, on layer 0's weights.
    std::array<DecodeGemvArgs, 5> calls;
    calls.fill(model_.decode_gemv_args(m, eps));
    calls[0].w = L.qkv.w, calls[0].n = qkv_dim, calls[0].k = h;
    calls[0].input = GemvInput::kRmsNorm, calls[0].norm_weight = L.attn_norm;
    calls[0].output = GemvOutput::kStore, calls[0].y = y_scratch;
    calls[1].w = L.o.w, calls[1].n = h, calls[1].k = qd;
    calls[1].input = GemvInput::kPlain, calls[1].x = x_scratch;
    calls[1].output = GemvOutput::kResidualAdd, calls[1].residual_out = res_out.as<float>();
    calls[2].w = L.gate_up.w, calls[2].n = 2 * ffn, calls[2].k = h;
    calls[2].input = GemvInput::kRmsNorm, calls[2].norm_weight = L.ffn_norm;
    calls[2].output = GemvOutput::kSwiglu, calls[2].y = y_scratch;
    calls[3].w = L.down.w, calls[3].n = h, calls[3].k = ffn;
    calls[3].input = GemvInput::kPlain, calls[3].x = x_scratch;
    calls[3].output = GemvOutput::kResidualAdd, calls[3].residual_out = res_out.as<float>();
    calls[4].w = model_.weights().lm_head.w, calls[4].n = c.vocab_size, calls[4].k = h;
    calls[4].input = GemvInput::kRmsNorm, calls[4].norm_weight = model_.weights().output_norm;
    calls[4].output = GemvOutput::kStore, calls[4].y = y_scratch, calls[4].out_dtype = DType::kF32;
    // The best blocks per multiprocessor of one call, and its time.
    auto tune_call = [&](DecodeGemvArgs& call, int* bps_out) -> Result<double> {
      double best = 1e30;
      for (int bps : {1, 2}) {
        call.blocks_per_sm = bps;
        LATHE_ASSIGN_OR_RETURN(
            const double us,
            time_launches_us([&] { return decode_gemv(call, stream); }, stream, 3, 10));
        if (us < best) best = us, *bps_out = bps;
      }
      return best;
    };
    std::array<double, 5> us{};
    for (size_t i = 0; i < calls.size(); ++i) {
      LATHE_ASSIGN_OR_RETURN(us[i], tune_call(calls[i], &ch.blocks_per_sm[i]));
    }
    // RoPE and the KV write: in the QKV epilogue, or qkv_rope_kv after the projection (slot -1:
    // timed without cache writes).
    std::vector<int32_t> pos_host(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i)
      pos_host[static_cast<size_t>(i)] = static_cast<int32_t>(100 + 37 * i);
    const std::vector<int64_t> slot_host(static_cast<size_t>(m), -1);
    LATHE_CUDA_TRY(
        cudaMemcpyAsync(rope_in.get(), pos_host.data(), 4 * m, cudaMemcpyHostToDevice, stream));
    LATHE_CUDA_TRY(cudaMemcpyAsync(rope_in.as<uint8_t>() + 64, slot_host.data(), 8 * m,
                                   cudaMemcpyHostToDevice, stream));
    const QkvRopeKvArgs rk = model_.qkv_rope_kv_args(
        L, c.rope_style, y_scratch, static_cast<int32_t>(m), rope_in.as<int32_t>(),
        reinterpret_cast<const int64_t*>(rope_in.as<uint8_t>() + 64), timing_kv_.layer(0));
    LATHE_ASSIGN_OR_RETURN(
        const double rope_kernel_us,
        time_launches_us([&] { return qkv_rope_kv(rk, stream); }, stream, 3, 10));
    double qkv_us = us[0] + rope_kernel_us;
    if (model_.options().switches.fused_rope && !qk_norm) {
      DecodeGemvArgs call = calls[0];
      call.output = GemvOutput::kRopeKv;
      call.rope = CudaModel::rope_kv_epilogue(rk);
      int bps = 1;
      LATHE_ASSIGN_OR_RETURN(ch.rope_fused_us, tune_call(call, &bps));
      ch.rope_unfused_us = qkv_us;
      ch.rope = prefer || ch.rope_fused_us < ch.rope_unfused_us;
      if (ch.rope) {
        qkv_us = ch.rope_fused_us;
        ch.blocks_per_sm[0] = bps;
      }
    }
    ch.fused_us = qkv_us + us[1] + us[2] + us[3];
    // The unfused layer: the projections as the dispatcher runs them, two norms and SwiGLU.
    const AddRmsNormArgs norm = model_.norm_args(L.ffn_norm, true, static_cast<int32_t>(m));
    LATHE_ASSIGN_OR_RETURN(
        const double norm_us,
        time_launches_us([&] { return add_rms_norm(norm, stream); }, stream, 3, 10));
    LATHE_ASSIGN_OR_RETURN(
        const double swiglu_us,
        time_launches_us(
            [&] { return swiglu(dt, act.gate_up.get(), act.act.get(), m, ffn, stream); }, stream, 3,
            10));
    ch.unfused_us = best_linear_us(qkv_dim, h, m) + best_linear_us(h, qd, m) +
                    best_linear_us(2 * ffn, h, m) + best_linear_us(h, ffn, m) + 2 * norm_us +
                    swiglu_us + rope_kernel_us;
    ch.lm_fused_us = us[4];
    ch.lm_unfused_us = best_linear_us(c.vocab_size, h, m) + norm_us;
    ch.lm_head = prefer || ch.lm_fused_us < ch.lm_unfused_us;
    // Every M the kernels fit is a candidate: whole steps decide (choose_fused_parts), unless
    // forced.
    ch.parts = hooks_.assume_fused_faster ? hooks_.parts : FusedParts::all();
    ch.use = ch.parts.any() && ch.parts.valid();
    if (!ch.use) ch.note = "test hook: no fused parts";
    choices_[static_cast<size_t>(m)] = ch;
    report_.push_back(ch);
  }
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status();
}

Result<std::vector<double>> FusedDecodeTuner::time_steps(
    const ForwardStep& step, const std::vector<const FusedDecodeChoice*>& fused) {
  cudaStream_t stream = model_.stream();
  constexpr int kRounds = 3;
  const size_t n = fused.size();
  std::vector<cudaGraphExec_t> execs(n, nullptr);
  auto destroy = [&]() {
    for (cudaGraphExec_t& e : execs)
      if (e != nullptr) cudaGraphExecDestroy(e), e = nullptr;
  };
  auto run_step = [&](size_t v) { return model_.forward_with(step, kv_, fused[v], nullptr); };
  for (size_t v = 0; v < n; ++v) {
    Status s = run_step(v);  // warm-up: modules, cuBLASLt plans
    if (const cudaError_t err = cudaStreamSynchronize(stream); s.is_ok() && err != cudaSuccess)
      s = cuda_error(err, "cudaStreamSynchronize");
    if (!s.is_ok()) {
      destroy();
      return s;
    }
    if (enforce_eager_) continue;
    // As served: one graph with its programmatic edges. If capture fails here, eager launches time
    // it (capture_graphs() decides about graphs later, on its own).
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      s = run_step(v);
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      if (s.is_ok() && end == cudaSuccess &&
          cudaGraphInstantiate(&execs[v], graph, 0) != cudaSuccess)
        execs[v] = nullptr;
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
    if (execs[v] == nullptr) cudaGetLastError();
  }
  std::vector<double> best(n, 0.0);
  for (int round = 0; round < kRounds; ++round)
    for (size_t v = 0; v < n; ++v) {
      auto replay = [&]() -> Status {
        if (execs[v] == nullptr) return run_step(v);
        LATHE_CUDA_TRY(cudaGraphLaunch(execs[v], stream));
        return Status();
      };
      Result<double> us = time_launches_us(replay, stream, 1, 4);
      if (!us.is_ok()) {
        destroy();
        return us.status();
      }
      if (round == 0 || us.value() < best[v]) best[v] = us.value();
    }
  destroy();
  return best;
}

Status FusedDecodeTuner::choose_parts(FusedDecodeChoice* ch, int32_t context, int32_t blocks) {
  const int32_t m = static_cast<int32_t>(ch->m);
  LATHE_ASSIGN_OR_RETURN(const ForwardStep step, pack_check_step(m, context, blocks));
  const auto& sets = fused_part_sets();
  std::vector<FusedDecodeChoice> trials(sets.size(), *ch);
  std::vector<const FusedDecodeChoice*> variants;
  for (size_t i = 0; i < sets.size(); ++i) {
    trials[i].parts = sets[i];
    variants.push_back(sets[i].any() ? &trials[i] : nullptr);
  }
  LATHE_ASSIGN_OR_RETURN(const std::vector<double> times, time_steps(step, variants));
  FusedParts best;
  double best_us = 0;
  ch->steps.clear();
  for (size_t i = 0; i < sets.size(); ++i) {
    const FusedParts& parts = sets[i];
    const double us = times[i];
    if (!parts.any()) ch->step_unfused_us = us;
    // A set must beat the fastest so far by 0.5% (replays of one graph vary by ~0.1-0.3%): ties go
    // to fewer fused parts, the unfused path first.
    if (!parts.any() || us < best_us * 0.995) best = parts, best_us = us;
    ch->steps += strformat("%s%s %.0f us", ch->steps.empty() ? "" : ", ", parts.name().c_str(), us);
  }
  ch->parts = best;
  ch->step_us = best_us;
  ch->use = best.any();
  ch->steps = strformat("(graph, %d context) ", context) + ch->steps + " -> " + best.name();
  if (!ch->use) ch->note = "the unfused step is the fastest: " + ch->steps;
  return Status();
}

}  // namespace lathe::cuda
