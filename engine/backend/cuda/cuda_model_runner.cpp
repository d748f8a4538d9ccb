#include "engine/backend/cuda/cuda_model_runner.h"

#include <algorithm>
#include <mutex>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"

namespace lathe::cuda {

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::create(const LoadedModel& model,
                                                                 const CudaRunnerOptions& options) {
  std::unique_ptr<CudaModelRunner> r(new CudaModelRunner());
  LATHE_RETURN_IF_ERROR(r->init(model, options));
  return r;
}

CudaModelRunner::~CudaModelRunner() {
  if (ctx_ != nullptr) cudaStreamSynchronize(ctx_->stream());
}

int64_t CudaModelRunner::kv_block_bytes(int32_t block_size) const {
  return model_->kv_layout(1, block_size).block_bytes();
}

Status CudaModelRunner::init(const LoadedModel& model, const CudaRunnerOptions& o) {
  LATHE_RETURN_IF_ERROR(model.config.validate());
  if (!is_act_dtype(o.dtype))
    return invalid_argument("the CUDA backend computes in bf16 or f16, not " +
                            std::string(dtype_name(o.dtype)));
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    return invalid_argument(
        strformat("--gpu-memory-utilization must be in (0, 1], got %g", o.gpu_memory_utilization));
  if (o.max_num_seqs < 0 || o.max_num_batched_tokens < 0 || o.block_size < 0 ||
      o.max_model_len < 0 || o.num_speculative_tokens < 0 || o.mask_cache_slots < 0)
    return invalid_argument(
        "max-num-seqs, max-num-batched-tokens, max-model-len, block size, the number of "
        "speculative tokens and mask cache slots must not be negative");
  LATHE_RETURN_IF_ERROR(require_single_rank(o.parallel, "the CUDA backend"));
  if (o.context != nullptr) {
    ctx_ = std::dynamic_pointer_cast<CudaDeviceContext>(o.context);
    if (ctx_ == nullptr)
      return invalid_argument("the device context given is not a CUDA context (" +
                              o.context->describe() + ")");
    if (ctx_->device() != o.device)
      return invalid_argument(strformat("the device context given is of CUDA device %d, not %d",
                                        ctx_->device(), o.device));
  } else {
    LATHE_ASSIGN_OR_RETURN(ctx_, CudaDeviceContext::create(o.device));
  }
  LATHE_RETURN_IF_ERROR(ctx_->activate());
  if (!o.switches.pdl) disable_pdl();
  options_ = o;
  const ModelConfig& c = model.config;
  max_model_len_ =
      o.max_model_len > 0 ? o.max_model_len : static_cast<int32_t>(c.max_position_embeddings);
  // 0 selects the GPU defaults (EngineConfig's convention): 8192 tokens, 256 sequences, blocks
  // of 16.
  const int32_t max_tokens = o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens : 8192;
  const int32_t max_seqs = std::min(o.max_num_seqs > 0 ? o.max_num_seqs : 256, max_tokens);
  block_size_ = o.block_size > 0 ? o.block_size : 16;

  // The device's planner counts this runner's load as what free memory lost while it ran; a second
  // load on the device waits, so that neither counts the other's allocations.
  MemoryPlanner& planner = ctx_->memory_planner();
  std::lock_guard<std::mutex> measuring(planner.measure_mutex());
  LATHE_ASSIGN_OR_RETURN(free_before_load_, ctx_->free_bytes());

  CudaModelOptions mo;
  mo.dtype = o.dtype;
  mo.max_tokens = max_tokens;
  mo.max_seqs = max_seqs;
  // Logits rows: one per sequence, or per sampled row with drafts.
  mo.max_logit_rows = static_cast<int32_t>(
      std::min<int64_t>(max_tokens, int64_t{max_seqs} * (1 + o.num_speculative_tokens)));
  mo.max_model_len = max_model_len_;
  mo.block_size = block_size_;
  mo.dummy_seed = o.dummy_seed;
  mo.gpu_memory_utilization = o.gpu_memory_utilization;
  mo.switches = o.switches;
  mo.parallel = o.parallel;
  LATHE_ASSIGN_OR_RETURN(model_, CudaModel::create(model, mo, ctx_));
  {
    // Before the activation buffers (sized by max-model-len too): can one sequence fit at all?
    LATHE_ASSIGN_OR_RETURN(const int64_t free_now, ctx_->free_bytes());
    LATHE_RETURN_IF_ERROR(check_one_sequence_fits(planner.budget(o.gpu_memory_utilization) -
                                                  (free_before_load_ - free_now)));
  }
  LATHE_RETURN_IF_ERROR(model_->allocate_activations());
  StepExecutorOptions eo;
  eo.max_tokens = max_tokens;
  eo.max_seqs = max_seqs;
  eo.max_model_len = max_model_len_;
  eo.enforce_eager = o.enforce_eager;
  eo.lookahead_max_seqs = o.switches.lookahead_max_seqs >= 0 ? o.switches.lookahead_max_seqs
                                                             : std::max(0, o.lookahead_max_seqs);
  eo.max_sample_rows = mo.max_logit_rows;
  eo.mask_lookup_late = o.switches.mask_lookup_late;
  eo.mask_cache = o.switches.mask_cache;
  eo.sampler_masks = o.switches.sampler_masks;
  eo.mask_cache_slots = o.mask_cache_slots;
  eo.graph_query_len = o.num_speculative_tokens > 0 ? 1 + o.num_speculative_tokens : 0;
  executor_ = std::make_unique<StepExecutor>(*model_, kv_, eo);
  LATHE_RETURN_IF_ERROR(executor_->allocate(block_size_));

  Status profiled = profile_step();
  if (!profiled.is_ok() && model_->uses_decode_attention() &&
      profiled.code() != ErrorCode::kOutOfMemory) {
    // The tensor-core decode kernel: keep the runner usable without it.
    log_warning("CUDA: the profiling step failed (" + profiled.message() +
                "); retrying with the split-KV decode attention kernel");
    cudaGetLastError();
    model_->drop_decode_attention();
    kv_.reset();
    LATHE_CUDA_TRY(cudaStreamSynchronize(ctx_->stream()));
    profiled = profile_step();
  }
  if (!profiled.is_ok() && model_->has_flashinfer() && profiled.code() != ErrorCode::kOutOfMemory) {
    // FlashInfer is the part of this backend not built here; keep the runner usable without it.
    log_warning("CUDA: the profiling step failed with FlashInfer prefill attention (" +
                profiled.message() + "); using Lathe's split-KV kernel for prefill");
    cudaGetLastError();
    model_->drop_flashinfer();
    kv_.reset();
    LATHE_CUDA_TRY(cudaStreamSynchronize(ctx_->stream()));
    profiled = profile_step();
  }
  LATHE_RETURN_IF_ERROR(profiled);
  LATHE_RETURN_IF_ERROR(plan_memory());
  log_info("CUDA: " + plan_summary());
  return Status();
}

Status CudaModelRunner::allocate_kv_cache(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    return invalid_argument(strformat(
        "KV cache needs num_blocks > 0 and block_size > 0, got %d and %d", num_blocks, block_size));
  LATHE_RETURN_IF_ERROR(ctx_->activate());
  LATHE_CUDA_TRY(cudaStreamSynchronize(ctx_->stream()));
  kv_.reset();
  kv_reservation_.reset();
  LATHE_RETURN_IF_ERROR(executor_->on_kv_changed(false));
  if (block_size != block_size_) {
    block_size_ = block_size;
    LATHE_RETURN_IF_ERROR(executor_->allocate(block_size));
    LATHE_RETURN_IF_ERROR(model_->set_block_size(block_size));
  }
  const KvLayout layout = model_->kv_layout(num_blocks, block_size);
  LATHE_RETURN_IF_ERROR(
      kv_.allocate(layout, strformat("KV cache of %d blocks", num_blocks).c_str(), ctx_->stream()));
  kv_reservation_ = MemoryReservation(
      &ctx_->memory_planner(),
      strformat("KV cache of %d blocks (%s)", num_blocks, model_->config().name.c_str()),
      layout.bytes());
  return executor_->on_kv_changed(true);
}

Result<ModelOutput> CudaModelRunner::execute(const ModelInput& input) {
  return executor_->execute(input);
}

Result<std::vector<float>> CudaModelRunner::compute_logits(const ModelInput& input) {
  return executor_->compute_logits(input);
}

}  // namespace lathe::cuda
