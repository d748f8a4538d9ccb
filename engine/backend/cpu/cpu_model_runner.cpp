#include "engine/backend/cpu/cpu_model_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/backend/cpu/cpu_dequant.h"
#include "engine/backend/cpu/cpu_dummy_weights.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/layer_weights.h"
#include "engine/model/weight_scheme.h"
#include "engine/runtime/draft_acceptance.h"
#include "engine/runtime/memory_planner.h"
#include "engine/runtime/model_input_check.h"
#include "engine/runtime/parallel.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/token_constraint.h"

namespace lathe {
namespace {

int64_t physical_ram_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

std::string display_name(const LoadedModel& m) {
  return m.config.name.empty() ? m.path : m.config.name;
}

}  // namespace

int64_t default_cpu_kv_budget_bytes() {
  const int64_t ram = physical_ram_bytes();
  const int64_t gib = int64_t{1} << 30;
  return ram > 0 ? std::min(gib, ram / 4) : gib;
}

void CpuModelRunner::FreeDeleter::operator()(float* p) const {
  std::free(p);
}

Result<std::unique_ptr<ModelRunner>> create_cpu_model_runner(const LoadedModel& model,
                                                             const CpuRunnerOptions& options) {
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<CpuModelRunner> runner,
                         CpuModelRunner::create(model, options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

Result<std::unique_ptr<CpuModelRunner>> CpuModelRunner::create(const LoadedModel& model,
                                                               const CpuRunnerOptions& options) {
  if (options.kv_dtype != DType::kF32)
    return unsupported(std::string("the CPU backend keeps its KV cache in f32; kv dtype ") +
                       std::string(dtype_name(options.kv_dtype)) + " is not supported");
  LATHE_RETURN_IF_ERROR(model.config.validate());
  LATHE_RETURN_IF_ERROR(require_single_rank(options.parallel, "the CPU backend"));
  std::unique_ptr<CpuModelRunner> r(new CpuModelRunner());
  r->config_ = model.config;
  r->plan_ = make_forward_plan(model.config, options.parallel.world_size);
  r->pool_ = std::make_unique<ThreadPool>(options.num_threads);
  if (model.dummy_gguf.active())
    return unsupported("--quantization " + model.dummy_gguf.name +
                       " with dummy weights (random GGUF blocks) runs on the CUDA backend only; "
                       "use --device cuda, or on the CPU load a GGUF file of that type");
  if (model.format == ModelFormat::kDummy) {
    if (model.online_quantization == OnlineQuant::kNone) {
      // Random weights are written, so every byte needs RAM: refuse what the machine cannot hold
      // before the allocation (the OS would overcommit and kill the process later).
      WeightFit fit;
      fit.model = display_name(model);
      fit.device = "RAM";
      fit.weight_bytes =
          model.config.num_parameters() * (model.config.weight_dtype == DType::kF32 ? 4 : 2);
      fit.total_bytes = physical_ram_bytes();
      if (fit.total_bytes > 0) LATHE_RETURN_IF_ERROR(check_weights_fit(fit));
    }
    try {
      LATHE_RETURN_IF_ERROR(r->init_dummy_weights(options, model.online_quantization));
    } catch (const std::bad_alloc&) {
      return out_of_memory(strformat("not enough RAM for random weights of %s (%.1f GiB)",
                                     display_name(model).c_str(),
                                     model.config.num_parameters() * 2.0 / (1 << 30)));
    }
  } else {
    LATHE_RETURN_IF_ERROR(r->init_weights(model));
  }
  r->inv_freq_ = cpu::rope_inv_freq(r->config_);

  const ModelConfig& c = r->config_;
  DeviceMemoryInfo& m = r->memory_;
  m.device_name = "CPU (" + std::to_string(r->pool_->num_threads()) + " threads, " +
                  cpu::cpu_isa_name(cpu::cpu_isa()) + ")";
  m.total_bytes = physical_ram_bytes();
  // Weights as stored (every quantized part included); with dummy weights or an online
  // quantization, as the runner holds them: every matrix in its format (the quantized buffers, not
  // the 16-bit source), the embedding, norms and biases.
  int64_t weight_bytes = r->token_embd_.nbytes() +
                         (c.tie_word_embeddings ? 0 : r->lm_head_.parts[0].bytes()) +
                         static_cast<int64_t>(r->output_norm_.size()) * 4;
  for (const Layer& l : r->layers_) {
    for (const Linear* g : {&l.qkv, &l.o, &l.gate_up, &l.down}) {
      for (const WeightMatrix& w : g->parts) weight_bytes += w.bytes();
      for (const std::vector<float>& b : g->biases)
        weight_bytes += static_cast<int64_t>(b.size()) * 4;
    }
    weight_bytes += static_cast<int64_t>(l.attn_norm.size() + l.ffn_norm.size() + l.q_norm.size() +
                                         l.k_norm.size()) *
                    4;
  }
  if (model.format != ModelFormat::kDummy && model.online_quantization == OnlineQuant::kNone)
    weight_bytes = model.weights.total_bytes();
  m.weight_bytes = weight_bytes;
  // Activations of a 512-token step (the CPU scheduler's default budget) and logits of 64 sampled
  // rows (its default sequence cap).
  const int64_t t = 512;
  m.activation_bytes =
      4 * (t * (3 * c.hidden_size + 2 * c.q_size() + 2 * c.kv_size() + 2 * c.intermediate_size) +
           64 * c.vocab_size);
  m.kv_budget_bytes = default_cpu_kv_budget_bytes();
  return r;
}

namespace {

// A float32 copy of a norm weight or bias vector (f32/f16/bf16 as stored); empty for an empty view.
Result<std::vector<float>> to_floats(const TensorView& t, const std::string& name) {
  std::vector<float> out;
  if (t.ndim == 0) return out;
  if (!cpu::is_supported_weight_type(t.dtype) || is_quantized(t.dtype))
    return unsupported(name + ": a " + std::string(dtype_name(t.dtype)) +
                       " vector cannot be read by the CPU backend");
  out.resize(static_cast<size_t>(t.numel()));
  cpu::detail::dequant_row(t.dtype, t.bytes(), out.data(), t.numel());
  return out;
}

}  // namespace

Status CpuModelRunner::init_weights(const LoadedModel& model) {
  LATHE_ASSIGN_OR_RETURN(const ModelWeights w, bind_model_weights(model));
  bound_owner_ = w.scheme;
  auto linear = [&](const LinearGroup& g, Linear* out) -> Status {
    for (size_t i = 0; i < g.parts.size(); ++i) {
      const WeightMatrix& m = g.parts[i];
      if (m.data.memory != MemoryKind::kHost)
        return invalid_argument(m.name + ": the CPU backend needs host weights");
      if (!cpu::is_supported_matrix(m))
        return unsupported(m.name + ": the CPU backend cannot compute with " + m.describe() +
                           " weights");
      out->parts.push_back(m);
      LATHE_ASSIGN_OR_RETURN(
          std::vector<float> bias,
          to_floats(i < g.biases.size() ? g.biases[i] : TensorView{}, m.name + " bias"));
      out->biases.push_back(std::move(bias));
    }
    return Status();
  };
  if (!cpu::is_supported_weight_type(w.token_embd.dtype))
    return unsupported("token_embd: the CPU backend cannot read " +
                       std::string(dtype_name(w.token_embd.dtype)) + " embeddings");
  token_embd_ = w.token_embd;
  LATHE_RETURN_IF_ERROR(linear(w.lm_head, &lm_head_));
  LATHE_ASSIGN_OR_RETURN(output_norm_, to_floats(w.output_norm, "output_norm"));
  layers_.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& src = w.layers[i];
    Layer& l = layers_[i];
    const std::string prefix = "blk." + std::to_string(i) + ".";
    LATHE_RETURN_IF_ERROR(linear(src.qkv, &l.qkv));
    LATHE_RETURN_IF_ERROR(linear(src.o, &l.o));
    LATHE_RETURN_IF_ERROR(linear(src.gate_up, &l.gate_up));
    LATHE_RETURN_IF_ERROR(linear(src.down, &l.down));
    LATHE_ASSIGN_OR_RETURN(l.attn_norm, to_floats(src.attn_norm, prefix + "attn_norm"));
    LATHE_ASSIGN_OR_RETURN(l.ffn_norm, to_floats(src.ffn_norm, prefix + "ffn_norm"));
    LATHE_ASSIGN_OR_RETURN(l.q_norm, to_floats(src.q_norm, prefix + "attn_q_norm"));
    LATHE_ASSIGN_OR_RETURN(l.k_norm, to_floats(src.k_norm, prefix + "attn_k_norm"));
  }
  return Status();
}

Status CpuModelRunner::init_dummy_weights(const CpuRunnerOptions& options, OnlineQuant online) {
  const ModelConfig& c = config_;
  const DType dtype = c.weight_dtype == DType::kF32 ? DType::kF32 : DType::kBF16;
  constexpr float kStd = 0.02f;
  // One random stream per matrix, in dummy_matrix_order() (the CUDA backend's order too).
  const std::vector<MatrixShape> order = dummy_matrix_order(c);
  std::vector<TensorView> mats;
  mats.reserve(order.size());
  for (size_t s = 0; s < order.size(); ++s)
    mats.push_back(cpu::make_random_matrix(dtype, order[s].n, order[s].k, kStd, options.dummy_seed,
                                           s, owned_, *pool_));
  size_t next = 0;
  auto take = [&]() { return mats[next++]; };
  // Layer projections: with --quantization, quantized as a checkpoint's would be at bind time.
  Status status;
  auto group = [&](std::vector<TensorView> parts, size_t num_biases, bool layer) {
    Linear g;
    for (const TensorView& t : parts) {
      WeightMatrix m = plain_matrix("", t);
      if (layer && online != OnlineQuant::kNone && status.is_ok()) {
        Result<WeightMatrix> q = quantize_matrix_online(m, online, &owned_);
        if (q.is_ok())
          m = std::move(q).value();
        else
          status = q.status();
      }
      g.parts.push_back(std::move(m));
    }
    g.biases.resize(num_biases);
    return g;
  };
  token_embd_ = take();
  lm_head_ = group({c.tie_word_embeddings ? token_embd_ : take()}, 1, false);
  output_norm_.assign(static_cast<size_t>(c.hidden_size), 1.0f);
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (Layer& l : layers_) {
    const TensorView q = take(), k = take(), v = take();
    l.qkv = group({q, k, v}, 3, true);
    if (c.attention_bias) {
      l.qkv.biases[0].assign(static_cast<size_t>(c.q_size()), 0.0f);
      l.qkv.biases[1].assign(static_cast<size_t>(c.kv_size()), 0.0f);
      l.qkv.biases[2].assign(static_cast<size_t>(c.kv_size()), 0.0f);
    }
    l.o = group({take()}, 1, true);
    const TensorView gate = take(), up = take();
    l.gate_up = group({gate, up}, 2, true);
    l.down = group({take()}, 1, true);
    l.attn_norm.assign(static_cast<size_t>(c.hidden_size), 1.0f);
    l.ffn_norm.assign(static_cast<size_t>(c.hidden_size), 1.0f);
    if (c.qk_norm) {
      l.q_norm.assign(static_cast<size_t>(c.head_dim), 1.0f);
      l.k_norm.assign(static_cast<size_t>(c.head_dim), 1.0f);
    }
  }
  if (status.is_ok() && online != OnlineQuant::kNone)
    log_info(strformat("--quantization %s: random layer projections quantized at load",
                       online_quant_name(online)));
  return status;
}

int64_t CpuModelRunner::kv_block_bytes(int32_t block_size) const {
  return config_.kv_bytes_per_token(sizeof(float)) * block_size;
}

Status CpuModelRunner::allocate_kv_cache(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    return invalid_argument(strformat(
        "KV cache needs num_blocks > 0 and block_size > 0, got %d and %d", num_blocks, block_size));
  const int64_t bytes = kv_block_bytes(block_size) * num_blocks;
  kv_.reset();
  num_blocks_ = 0;
  // calloc: the OS hands out zero pages lazily, so untouched blocks cost no RAM.
  float* p =
      static_cast<float*>(std::calloc(static_cast<size_t>(bytes / sizeof(float)), sizeof(float)));
  if (p == nullptr)
    return out_of_memory("cannot allocate " + format_bytes(static_cast<double>(bytes)) + " for " +
                         std::to_string(num_blocks) + " KV blocks; lower --kv-cache-memory");
  kv_.reset(p);
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  return Status();
}

Status CpuModelRunner::check_input(const ModelInput& in) const {
  if (kv_ == nullptr) return internal_error("allocate_kv_cache() must be called before execute()");
  return check_model_input(in, ModelInputBounds{num_blocks_, block_size_, config_.vocab_size});
}

Result<std::vector<float>> CpuModelRunner::compute_logits(const ModelInput& input) {
  LATHE_RETURN_IF_ERROR(forward(input));
  const size_t n =
      static_cast<size_t>(input.num_sample_rows()) * static_cast<size_t>(config_.vocab_size);
  return std::vector<float>(logits_.begin(), logits_.begin() + static_cast<std::ptrdiff_t>(n));
}

Result<ModelOutput> CpuModelRunner::execute(const ModelInput& input) {
  LATHE_RETURN_IF_ERROR(forward(input));
  ModelOutput out;
  const int64_t n = input.num_sample_rows();
  out.tokens.resize(static_cast<size_t>(n));
  const int64_t vocab = config_.vocab_size;
  // Masks are looked up here, on the engine thread (token_constraint.h), not on the workers.
  std::vector<std::shared_ptr<const TokenMask>> masks(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) masks[static_cast<size_t>(i)] = row_mask(input.sampling[i]);
  pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.tokens[i] = sample_token(logits_.data() + i * vocab, vocab, input.sampling[i],
                                   masks[static_cast<size_t>(i)].get());
  });
  LATHE_RETURN_IF_ERROR(accept_draft_tokens(input, &out));
  return out;
}

}  // namespace lathe
