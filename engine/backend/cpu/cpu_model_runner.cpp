#include "engine/backend/cpu/cpu_model_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/backend/cpu/cpu_dequant.h"
#include "engine/backend/cpu/cpu_dummy_weights.h"
#include "engine/core/strings.h"
#include "engine/runtime/draft_acceptance.h"
#include "engine/runtime/model_input_check.h"
#include "engine/runtime/sampler.h"

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

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
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
  std::unique_ptr<CpuModelRunner> r(new CpuModelRunner());
  r->config_ = model.config;
  r->pool_ = std::make_unique<ThreadPool>(options.num_threads);
  if (model.format == ModelFormat::kDummy) {
    try {
      LATHE_RETURN_IF_ERROR(r->init_dummy_weights(options));
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
  int64_t weight_bytes = model.format == ModelFormat::kDummy ? 0 : model.weights.total_bytes();
  if (model.format == ModelFormat::kDummy) {
    for (const Layer& l : r->layers_)
      for (const TensorView* t : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
        weight_bytes += t->nbytes();
    weight_bytes += r->token_embd_.nbytes() + (c.tie_word_embeddings ? 0 : r->output_.nbytes());
  }
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

Status CpuModelRunner::init_weights(const LoadedModel& model) {
  const ModelConfig& c = config_;
  const WeightStore& w = model.weights;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols,
                    TensorView* out) -> Status {
    LATHE_ASSIGN_OR_RETURN(*out, w.get(name, {rows, cols}));
    if (out->memory != MemoryKind::kHost)
      return invalid_argument(name + ": the CPU backend needs host weights");
    if (!cpu::is_supported_weight_type(out->dtype))
      return unsupported(name + ": the CPU backend cannot compute with " +
                         std::string(dtype_name(out->dtype)) + " weights");
    return Status();
  };
  auto vector = [&](const std::string& name, int64_t n, std::vector<float>* out) -> Status {
    LATHE_ASSIGN_OR_RETURN(TensorView t, w.get(name, {n}));
    if (!cpu::is_supported_weight_type(t.dtype) || is_quantized(t.dtype))
      return unsupported(name + ": a " + std::string(dtype_name(t.dtype)) +
                         " vector cannot be read by the CPU backend");
    out->resize(static_cast<size_t>(n));
    cpu::detail::dequant_row(t.dtype, t.bytes(), out->data(), n);
    return Status();
  };
  LATHE_RETURN_IF_ERROR(matrix("token_embd", c.vocab_size, c.hidden_size, &token_embd_));
  if (c.tie_word_embeddings && !w.contains("output")) {
    output_ = token_embd_;
  } else {
    LATHE_RETURN_IF_ERROR(matrix("output", c.vocab_size, c.hidden_size, &output_));
  }
  LATHE_RETURN_IF_ERROR(vector("output_norm", c.hidden_size, &output_norm_));
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Layer& l = layers_[i];
    auto name = [i](const char* suffix) { return WeightStore::layer_name(i, suffix); };
    LATHE_RETURN_IF_ERROR(matrix(name("attn_q"), c.q_size(), c.hidden_size, &l.q));
    LATHE_RETURN_IF_ERROR(matrix(name("attn_k"), c.kv_size(), c.hidden_size, &l.k));
    LATHE_RETURN_IF_ERROR(matrix(name("attn_v"), c.kv_size(), c.hidden_size, &l.v));
    LATHE_RETURN_IF_ERROR(matrix(name("attn_output"), c.hidden_size, c.q_size(), &l.o));
    LATHE_RETURN_IF_ERROR(matrix(name("ffn_gate"), c.intermediate_size, c.hidden_size, &l.gate));
    LATHE_RETURN_IF_ERROR(matrix(name("ffn_up"), c.intermediate_size, c.hidden_size, &l.up));
    LATHE_RETURN_IF_ERROR(matrix(name("ffn_down"), c.hidden_size, c.intermediate_size, &l.down));
    LATHE_RETURN_IF_ERROR(vector(name("attn_norm"), c.hidden_size, &l.attn_norm));
    LATHE_RETURN_IF_ERROR(vector(name("ffn_norm"), c.hidden_size, &l.ffn_norm));
    if (c.attention_bias) {
      LATHE_RETURN_IF_ERROR(vector(name("attn_q_bias"), c.q_size(), &l.q_bias));
      LATHE_RETURN_IF_ERROR(vector(name("attn_k_bias"), c.kv_size(), &l.k_bias));
      LATHE_RETURN_IF_ERROR(vector(name("attn_v_bias"), c.kv_size(), &l.v_bias));
    }
    if (c.qk_norm) {
      LATHE_RETURN_IF_ERROR(vector(name("attn_q_norm"), c.head_dim, &l.q_norm));
      LATHE_RETURN_IF_ERROR(vector(name("attn_k_norm"), c.head_dim, &l.k_norm));
    }
  }
  return Status();
}

Status CpuModelRunner::init_dummy_weights(const CpuRunnerOptions& options) {
  const ModelConfig& c = config_;
  const DType dtype = c.weight_dtype == DType::kF32 ? DType::kF32 : DType::kBF16;
  constexpr float kStd = 0.02f;
  uint64_t stream = 0;
  auto random = [&](int64_t rows, int64_t cols) {
    return cpu::make_random_matrix(dtype, rows, cols, kStd, options.dummy_seed, stream++, owned_,
                                   *pool_);
  };
  token_embd_ = random(c.vocab_size, c.hidden_size);
  output_ = c.tie_word_embeddings ? token_embd_ : random(c.vocab_size, c.hidden_size);
  output_norm_.assign(static_cast<size_t>(c.hidden_size), 1.0f);
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (Layer& l : layers_) {
    l.q = random(c.q_size(), c.hidden_size);
    l.k = random(c.kv_size(), c.hidden_size);
    l.v = random(c.kv_size(), c.hidden_size);
    l.o = random(c.hidden_size, c.q_size());
    l.gate = random(c.intermediate_size, c.hidden_size);
    l.up = random(c.intermediate_size, c.hidden_size);
    l.down = random(c.hidden_size, c.intermediate_size);
    l.attn_norm.assign(static_cast<size_t>(c.hidden_size), 1.0f);
    l.ffn_norm.assign(static_cast<size_t>(c.hidden_size), 1.0f);
    if (c.attention_bias) {
      l.q_bias.assign(static_cast<size_t>(c.q_size()), 0.0f);
      l.k_bias.assign(static_cast<size_t>(c.kv_size()), 0.0f);
      l.v_bias.assign(static_cast<size_t>(c.kv_size()), 0.0f);
    }
    if (c.qk_norm) {
      l.q_norm.assign(static_cast<size_t>(c.head_dim), 1.0f);
      l.k_norm.assign(static_cast<size_t>(c.head_dim), 1.0f);
    }
  }
  return Status();
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

Status CpuModelRunner::forward(const ModelInput& in) {
  LATHE_RETURN_IF_ERROR(check_input(in));
  const ModelConfig& c = config_;
  const int64_t t_count = in.num_tokens();
  const int64_t hidden = c.hidden_size, q_size = c.q_size(), kv_size = c.kv_size(),
                ffn = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  ThreadPool& pool = *pool_;
  grow(x_, t_count * hidden);
  grow(h_, t_count * hidden);
  grow(tmp_, t_count * hidden);
  grow(q_, t_count * q_size);
  grow(attn_, t_count * q_size);
  grow(k_, t_count * kv_size);
  grow(v_, t_count * kv_size);
  grow(gate_, t_count * ffn);
  grow(up_, t_count * ffn);
  grow(rope_cos_, t_count * (c.head_dim / 2));
  grow(rope_sin_, t_count * (c.head_dim / 2));
  cpu::rope_table(in.positions.data(), t_count, inv_freq_, rope_cos_.data(), rope_sin_.data());

  // Rows whose hidden state reaches the logits: the trailing sample_count(i) tokens of each sampled
  // sequence (its last token, or with drafts the last verified token and the drafts), ascending.
  const int64_t n_out = in.num_sample_rows();
  std::vector<int32_t> out_rows;
  out_rows.reserve(static_cast<size_t>(n_out));
  for (size_t i = 0; i < in.sample_seqs.size(); ++i) {
    const int32_t end = in.query_start[in.sample_seqs[i] + 1];
    for (int32_t r = end - in.sample_count(i); r < end; ++r) out_rows.push_back(r);
  }

  cpu::embedding(token_embd_, in.token_ids.data(), t_count, x_.data());

  cpu::PagedAttentionArgs attn_args;
  attn_args.q = q_.data();
  attn_args.out = attn_.data();
  attn_args.query_start = in.query_start.data();
  attn_args.seq_lens = in.seq_lens.data();
  attn_args.block_tables = in.block_tables.data();
  attn_args.num_seqs = in.num_seqs();
  attn_args.max_blocks_per_seq = in.max_blocks_per_seq;
  attn_args.num_heads = c.num_heads;
  attn_args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  attn_args.sliding_window = static_cast<int32_t>(c.sliding_window);

  const int64_t layer_floats = static_cast<int64_t>(num_blocks_) * block_size_ * kv_size;
  int64_t rows = t_count;  // rows still flowing through the layer (shrinks in the last layer)
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const Layer& l = layers_[li];
    if (li == 0) {
      cpu::rms_norm(x_.data(), l.attn_norm.data(), t_count, hidden, eps, h_.data());
    } else {
      cpu::add_rms_norm(x_.data(), tmp_.data(), l.attn_norm.data(), t_count, hidden, eps,
                        h_.data());
    }
    const cpu::LinearGroupItem qkv[3] = {
        {&l.q, l.q_bias.empty() ? nullptr : l.q_bias.data(), q_.data()},
        {&l.k, l.k_bias.empty() ? nullptr : l.k_bias.data(), k_.data()},
        {&l.v, l.v_bias.empty() ? nullptr : l.v_bias.data(), v_.data()}};
    cpu::linear_group(h_.data(), t_count, qkv, 3, pool);
    if (c.qk_norm) {
      cpu::rms_norm(q_.data(), l.q_norm.data(), t_count * c.num_heads, c.head_dim, eps, q_.data());
      cpu::rms_norm(k_.data(), l.k_norm.data(), t_count * c.num_kv_heads, c.head_dim, eps,
                    k_.data());
    }
    cpu::rope(q_.data(), t_count, c.num_heads, c.head_dim, rope_cos_.data(), rope_sin_.data(),
              c.rope_style);
    cpu::rope(k_.data(), t_count, c.num_kv_heads, c.head_dim, rope_cos_.data(), rope_sin_.data(),
              c.rope_style);
    cpu::KvLayerView cache;
    cache.k = kv_.get() + 2 * li * layer_floats;
    cache.v = cache.k + layer_floats;
    cache.block_size = block_size_;
    cache.num_kv_heads = c.num_kv_heads;
    cache.head_dim = c.head_dim;
    cpu::write_kv(k_.data(), v_.data(), in.slot_mapping.data(), t_count, cache);
    cpu::paged_attention(attn_args, cache, pool);

    if (li == c.num_layers - 1) {
      // Only the sampled rows matter from here on: move them (residual and attention output) to the
      // front. Rows are ascending, so row i comes from row out_rows[i] >= i.
      for (int64_t i = 0; i < n_out; ++i) {
        const int64_t r = out_rows[i];
        std::memmove(x_.data() + i * hidden, x_.data() + r * hidden, sizeof(float) * hidden);
        std::memmove(attn_.data() + i * q_size, attn_.data() + r * q_size, sizeof(float) * q_size);
      }
      rows = n_out;
      if (rows == 0) break;
    }
    cpu::linear(attn_.data(), rows, l.o, nullptr, tmp_.data(), pool);
    cpu::add_rms_norm(x_.data(), tmp_.data(), l.ffn_norm.data(), rows, hidden, eps, h_.data());
    const cpu::LinearGroupItem gate_up[2] = {{&l.gate, nullptr, gate_.data()},
                                             {&l.up, nullptr, up_.data()}};
    cpu::linear_group(h_.data(), rows, gate_up, 2, pool);
    cpu::swiglu(gate_.data(), up_.data(), gate_.data(), rows * ffn);
    cpu::linear(gate_.data(), rows, l.down, nullptr, tmp_.data(), pool);
  }

  grow(logits_, n_out * c.vocab_size);
  if (n_out == 0) return Status();
  cpu::add_rms_norm(x_.data(), tmp_.data(), output_norm_.data(), n_out, hidden, eps, h_.data());
  cpu::linear(h_.data(), n_out, output_, nullptr, logits_.data(), pool);
  return Status();
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
  pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.tokens[i] = sample_token(logits_.data() + i * vocab, vocab, input.sampling[i]);
  });
  LATHE_RETURN_IF_ERROR(accept_draft_tokens(input, &out));
  return out;
}

}  // namespace lathe
