#include "engine/backend/cuda/cuda_model_runner.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/process_logits.h"
#include "engine/backend/cuda/sample_tokens.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"

namespace lathe::cuda {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kEmbedding:
      return "embedding";
    case Phase::kNorm:
      return "rmsnorm";
    case Phase::kQkvGemm:
      return "qkv_proj";
    case Phase::kRopeKv:
      return "rope_kv_write";
    case Phase::kAttention:
      return "attention";
    case Phase::kOGemm:
      return "o_proj";
    case Phase::kGateUpGemm:
      return "gate_up_proj";
    case Phase::kSwiglu:
      return "swiglu";
    case Phase::kDownGemm:
      return "down_proj";
    case Phase::kLmHead:
      return "lm_head";
    case Phase::kSampler:
      return "sampler";
    case Phase::kCount:
      break;
  }
  return "?";
}

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::create(const LoadedModel& model,
                                                                 const CudaRunnerOptions& options) {
  std::unique_ptr<CudaModelRunner> r(new CudaModelRunner());
  LATHE_RETURN_IF_ERROR(r->init(model, options));
  return r;
}

CudaModelRunner::~CudaModelRunner() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [b, g] : graphs_) cudaGraphExecDestroy(g);
  for (auto& [b, g] : profile_graphs_) cudaGraphExecDestroy(g);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (step_done_ != nullptr) cudaEventDestroy(step_done_);
  if (ahead_done_ != nullptr) cudaEventDestroy(ahead_done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

int64_t CudaModelRunner::kv_block_bytes(int32_t block_size) const {
  return config_.kv_bytes_per_token(2) * block_size;
}

Status CudaModelRunner::init(const LoadedModel& model, const CudaRunnerOptions& o) {
  LATHE_RETURN_IF_ERROR(model.config.validate());
  if (!is_act_dtype(o.dtype))
    return invalid_argument("the CUDA backend computes in bf16 or f16, not " +
                            std::string(dtype_name(o.dtype)));
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    return invalid_argument(
        strformat("--gpu-memory-utilization must be in (0, 1], got %g", o.gpu_memory_utilization));
  if (o.max_num_seqs < 0 || o.max_num_batched_tokens < 0 || o.block_size < 0 || o.max_model_len < 0)
    return invalid_argument(
        "max-num-seqs, max-num-batched-tokens, max-model-len and block size must not be negative");
  std::string why;
  if (!cuda_device_available(&why)) return unsupported("no usable CUDA device: " + why);
  int count = 0;
  LATHE_CUDA_TRY(cudaGetDeviceCount(&count));
  if (o.device < 0 || o.device >= count)
    return invalid_argument(
        strformat("CUDA device %d does not exist (%d devices)", o.device, count));
  LATHE_CUDA_TRY(cudaSetDevice(o.device));
  LATHE_ASSIGN_OR_RETURN(props_, device_props(o.device));
  if (props_.major < 8)
    return unsupported(
        strformat("%s has compute capability %d.%d; the CUDA backend needs 8.0 (Ampere) or newer",
                  props_.name.c_str(), props_.major, props_.minor));
  LATHE_CUDA_TRY(cudaFree(nullptr));  // create the context before measuring free memory
  LATHE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  size_t free_b = 0, total_b = 0;
  LATHE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  free_at_start_ = static_cast<int64_t>(free_b);

  config_ = model.config;
  options_ = o;
  max_model_len_ =
      o.max_model_len > 0 ? o.max_model_len : static_cast<int32_t>(config_.max_position_embeddings);
  // 0 selects the GPU defaults (EngineConfig's convention): 8192 tokens, 256 sequences, blocks
  // of 16.
  max_tokens_ = o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens : 8192;
  max_seqs_ = std::min(o.max_num_seqs > 0 ? o.max_num_seqs : 256, max_tokens_);
  block_size_ = o.block_size > 0 ? o.block_size : 16;
  const char* env = std::getenv("LATHE_CUDA_ATTENTION");
  force_own_attention_ = env != nullptr && std::string_view(env) == "own";
  // A/B switches and escape hatches (docs/gpu-notes.md): LATHE_CUDA_DECODE_ATTENTION=split keeps
  // decode on the split-KV kernel; LATHE_CUDA_FUSED=0 turns the fused batch-1..4 path off, =1 uses
  // it wherever it fits without timing it first.
  const char* dattn = std::getenv("LATHE_CUDA_DECODE_ATTENTION");
  decode_attention_ =
      !(dattn != nullptr && std::string_view(dattn) == "split") &&
      decode_attention_supports(config_.head_dim, config_.num_heads, config_.num_kv_heads);
  // LATHE_CUDA_DECODE_SPLIT_TOKENS: the decode attention's shortest split (A/B runs).
  if (const char* st = std::getenv("LATHE_CUDA_DECODE_SPLIT_TOKENS")) {
    const int v = std::atoi(st);
    if (v >= 16 && v % 16 == 0) {
      decode_split_tokens_ = v;
    } else {
      log_warning(
          strformat("CUDA: LATHE_CUDA_DECODE_SPLIT_TOKENS=%s ignored (a multiple of 16)", st));
    }
  }
  if (const char* bs = std::getenv("LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM")) {
    const int v = std::atoi(bs);
    if (v >= 1 && v <= 64) {
      decode_split_blocks_per_sm_ = v;
    } else {
      log_warning(
          strformat("CUDA: LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM=%s ignored (1 to 64 blocks)", bs));
    }
  }
  // The decode attention merges its splits in thread-block clusters where the device allows it
  // (decode_attention.h); LATHE_CUDA_DECODE_CLUSTER=0 keeps the workspace merge, =2..16 caps the
  // cluster size.
  if (decode_attention_)
    decode_cluster_splits_ = decode_attention_cluster_splits(options_.dtype, config_.head_dim);
  if (const char* cl = std::getenv("LATHE_CUDA_DECODE_CLUSTER")) {
    const int v = std::atoi(cl);
    if (v == 0 || (v >= 2 && v <= kDecodeAttentionMaxClusterSplits)) {
      decode_cluster_splits_ = std::min(decode_cluster_splits_, v);
    } else {
      log_warning(
          strformat("CUDA: LATHE_CUDA_DECODE_CLUSTER=%s ignored (0, or 2 to 16 blocks)", cl));
    }
  }
  // LATHE_CUDA_LOOKAHEAD: the lookahead's batch limit (0: off), over the option's.
  lookahead_max_seqs_ = std::max(0, o.lookahead_max_seqs);
  if (const char* la = std::getenv("LATHE_CUDA_LOOKAHEAD")) {
    const int v = std::atoi(la);
    if (v >= 0 && v <= 256 &&
        std::string_view(la).find_first_not_of("0123456789") == std::string_view::npos) {
      lookahead_max_seqs_ = v;
    } else {
      log_warning(strformat("CUDA: LATHE_CUDA_LOOKAHEAD=%s ignored (0 to 256 sequences)", la));
    }
  }
  const char* fused = std::getenv("LATHE_CUDA_FUSED");
  fused_allowed_ = !(fused != nullptr && std::string_view(fused) == "0");
  fused_forced_ = fused != nullptr && std::string_view(fused) == "1";
  const char* epilogues = std::getenv("LATHE_CUDA_GEMV_EPILOGUES");
  gemv_epilogues_ = !(epilogues != nullptr && std::string_view(epilogues) == "0");
  const char* fused_rope = std::getenv("LATHE_CUDA_FUSED_ROPE");
  fused_rope_allowed_ = !(fused_rope != nullptr && std::string_view(fused_rope) == "0");
  hooks_ = fused_decode_test_hooks();

  const auto t0 = Clock::now();
  LATHE_ASSIGN_OR_RETURN(weights_, upload_weights(model, o.dtype, o.dummy_seed, stream_));
  log_info(strformat("CUDA: %s of weights on %s in %.1f s",
                     format_bytes(static_cast<double>(weights_.storage.bytes())).c_str(),
                     props_.name.c_str(), us_since(t0) / 1e6));

  const std::vector<float> inv = rope_inverse_frequencies(config_);
  LATHE_RETURN_IF_ERROR(
      inv_freq_.allocate(static_cast<int64_t>(inv.size() * sizeof(float)), "RoPE frequencies"));
  LATHE_CUDA_TRY(
      cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));

  {
    // Before the activation buffers (sized by max-model-len too): can one sequence fit at all?
    size_t f = 0, t = 0;
    LATHE_CUDA_TRY(cudaMemGetInfo(&f, &t));
    const int64_t upper = static_cast<int64_t>(static_cast<double>(t) * o.gpu_memory_utilization) -
                          (static_cast<int64_t>(t) - static_cast<int64_t>(f));
    LATHE_RETURN_IF_ERROR(check_one_sequence_fits(upper));
  }
  LATHE_ASSIGN_OR_RETURN(gemm_, Gemm::create());
  linear_ = std::make_unique<LinearDispatcher>(gemm_.get(), o.dtype);
  LATHE_RETURN_IF_ERROR(create_prefill_attention());
  LATHE_RETURN_IF_ERROR(allocate_buffers());
  Status profiled = profile_step();
  if (!profiled.is_ok() && decode_attention_ && profiled.code() != ErrorCode::kOutOfMemory) {
    // The tensor-core decode kernel is new in run 2: keep the runner usable without it.
    log_warning("CUDA: the profiling step failed (" + profiled.message() +
                "); retrying with the split-KV decode attention kernel");
    cudaGetLastError();
    decode_attention_ = false;
    kv_.reset();
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    profiled = profile_step();
  }
  if (!profiled.is_ok() && prefill_ != nullptr && profiled.code() != ErrorCode::kOutOfMemory) {
    // FlashInfer is the part of this backend not built here; keep the runner usable without it.
    log_warning("CUDA: the profiling step failed with FlashInfer prefill attention (" +
                profiled.message() + "); using Lathe's split-KV kernel for prefill");
    cudaGetLastError();
    prefill_.reset();
    kv_.reset();
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    profiled = profile_step();
  }
  LATHE_RETURN_IF_ERROR(profiled);
  LATHE_RETURN_IF_ERROR(plan_memory());
  log_info("CUDA: " + plan_summary());
  return Status();
}

Status CudaModelRunner::create_prefill_attention() {
  prefill_.reset();
  const bool window_active = config_.sliding_window > 0 && max_model_len_ > config_.sliding_window;
  const int32_t window = window_active ? static_cast<int32_t>(config_.sliding_window) : 0;
  if (force_own_attention_ || !PrefillAttention::supports(options_.dtype, config_.head_dim, window))
    return Status();
  auto p = PrefillAttention::create(options_.dtype, static_cast<int32_t>(config_.num_heads),
                                    static_cast<int32_t>(config_.num_kv_heads),
                                    static_cast<int32_t>(config_.head_dim), block_size_,
                                    max_tokens_, max_seqs_);
  if (p.is_ok()) {
    prefill_ = std::move(p).value();
  } else if (p.status().code() != ErrorCode::kUnsupported) {
    return p.status();
  }
  return Status();
}

int32_t CudaModelRunner::bucket_for(int32_t num_seqs) const {
  for (int32_t b : buckets_)
    if (b >= num_seqs) return graphs_.count(b) != 0 ? b : 0;
  return 0;
}

Status CudaModelRunner::allocate_kv_cache(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    return invalid_argument(strformat(
        "KV cache needs num_blocks > 0 and block_size > 0, got %d and %d", num_blocks, block_size));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  ahead_.pending = false;  // finished with the stream; its graph is about to go
  for (auto& [b, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
  for (auto& [b, g] : profile_graphs_) cudaGraphExecDestroy(g);
  profile_graphs_.clear();
  kv_.reset();
  num_blocks_ = 0;
  if (block_size != block_size_) {
    block_size_ = block_size;
    LATHE_RETURN_IF_ERROR(allocate_step_buffers());
    if (prefill_) LATHE_RETURN_IF_ERROR(create_prefill_attention());  // FlashInfer plans in pages
  }
  const int64_t bytes = kv_block_bytes(block_size) * num_blocks;
  LATHE_RETURN_IF_ERROR(kv_.allocate(bytes, strformat("KV cache of %d blocks", num_blocks)));
  // Zeros: attention never reads a position before it is written, but a partly filled last page is
  // loaded whole by the tiled kernels (and masked), so it must not hold NaN bit patterns.
  LATHE_CUDA_TRY(cudaMemsetAsync(kv_.get(), 0, static_cast<size_t>(bytes), stream_));
  num_blocks_ = num_blocks;
  kv_layer_elems_ =
      static_cast<int64_t>(num_blocks) * block_size * config_.num_kv_heads * config_.head_dim;
  limits_.num_blocks = num_blocks;
  limits_.block_size = block_size;
  if (!options_.enforce_eager) LATHE_RETURN_IF_ERROR(capture_graphs());
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status();
}

namespace {

// A decode step of `b` sequences of one token each at position 0 (used to warm up and capture).
ModelInput dummy_decode(int32_t b) {
  ModelInput in;
  for (int32_t s = 0; s < b; ++s) {
    in.token_ids.push_back(0);
    in.positions.push_back(0);
    in.slot_mapping.push_back(-1);
    in.query_start.push_back(s);
    in.seq_lens.push_back(1);
  }
  in.query_start.push_back(b);
  in.max_blocks_per_seq = 1;
  in.block_tables.assign(static_cast<size_t>(b), 0);
  in.max_seq_len = 1;
  in.max_query_len = 1;
  return in;
}

}  // namespace

Status CudaModelRunner::capture_one(int32_t b, bool with_events, cudaGraphExec_t* exec) {
  const ModelInput in = dummy_decode(b);
  LATHE_RETURN_IF_ERROR(check_step(in, limits_));
  LATHE_RETURN_IF_ERROR(pack_step(in, limits_, b, true, step_host_.as<uint8_t>(),
                                  step_host_.bytes(), step_dev_.bytes(), &packed_));
  LATHE_CUDA_TRY(cudaMemcpyAsync(step_dev_.get(), step_host_.get(),
                                 static_cast<size_t>(packed_.bytes), cudaMemcpyHostToDevice,
                                 stream_));
  const StepArrays d = StepArrays::at(step_dev_.get(), packed_.layout);
  const int32_t splits = paged_attention_splits_for(b, config_.num_kv_heads, props_.sm_count);
  // Warm-up outside the capture: loads modules and caches cuBLASLt plans.
  recording_ = false;
  LATHE_RETURN_IF_ERROR(forward(d, b, b, b, AttnPath::kDecode, splits));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (with_events) LATHE_RETURN_IF_ERROR(ensure_events());
  LATHE_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  recording_ = with_events;
  Status s = with_events ? record_start() : Status();
  if (s.is_ok()) s = forward(d, b, b, b, AttnPath::kDecode, splits);
  recording_ = false;
  capturing_ = false;
  if (with_events) profile_graph_events_ = events_used_;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!s.is_ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves its error behind; later launches must not see it
    return s.with_context(strformat("capturing the decode graph of batch %d", b));
  }
  if (end != cudaSuccess)
    return cuda_error(end, strformat("cudaStreamEndCapture (decode batch %d)", b));
  const cudaError_t inst = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess)
    return cuda_error(inst, strformat("cudaGraphInstantiate (decode batch %d)", b));
  return Status();
}

Status CudaModelRunner::capture_graphs() {
  buckets_.clear();
  const int32_t limit = std::min(max_seqs_, max_tokens_);
  for (int32_t b : {1, 2, 4})
    if (b <= limit) buckets_.push_back(b);
  for (int32_t b = 8; b <= limit; b += 8) buckets_.push_back(b);
  if (buckets_.empty() || buckets_.back() != limit) buckets_.push_back(limit);
  const auto t0 = Clock::now();
  for (int32_t b : buckets_) {
    cudaGraphExec_t exec = nullptr;
    Status s = capture_one(b, false, &exec);
    if (!s.is_ok() && pdl_enabled()) {
      // Graph capture of programmatic (PDL) edges is the newest feature used here: fall back to
      // ordinary launches before giving up on graphs.
      log_warning("CUDA: capturing a decode graph with programmatic dependent launch failed (" +
                  s.message() + "); capturing without it");
      disable_pdl();
      for (auto& [bb, g] : graphs_) cudaGraphExecDestroy(g);
      graphs_.clear();
      return capture_graphs();
    }
    if (!s.is_ok()) {
      log_warning("CUDA: decode graphs unavailable (" + s.message() +
                  "); decode steps run eagerly");
      for (auto& [bb, g] : graphs_) cudaGraphExecDestroy(g);
      graphs_.clear();
      return Status();
    }
    graphs_[b] = exec;
  }
  log_info(strformat("CUDA: captured %zu decode graphs (batch 1..%d) in %.2f s", buckets_.size(),
                     limit, us_since(t0) / 1e6));
  return Status();
}
Status CudaModelRunner::ensure_events() {
  if (!events_.empty()) return Status();
  // Enough for the largest step: a start, 9 marks per layer, 4 more and the sampler.
  const size_t n = static_cast<size_t>(config_.num_layers) * 9 + 8;
  events_.resize(n, nullptr);
  event_phase_.resize(n, Phase::kCount);
  for (cudaEvent_t& ev : events_) LATHE_CUDA_TRY(cudaEventCreate(&ev));
  return Status();
}

Status CudaModelRunner::record_event(Phase p) {
  if (events_used_ >= events_.size()) return internal_error("profiling: out of events");
  // In a capture, an external record node, so that the replayed graph records the event itself.
  LATHE_CUDA_TRY(
      cudaEventRecordWithFlags(events_[events_used_], stream_,
                               capturing_ ? cudaEventRecordExternal : cudaEventRecordDefault));
  event_phase_[events_used_] = p;
  ++events_used_;
  return Status();
}

Status CudaModelRunner::record_start() {
  LATHE_RETURN_IF_ERROR(ensure_events());
  events_used_ = 0;
  return record_event(Phase::kCount);
}

Status CudaModelRunner::mark(Phase p) {
  if (!recording_) return Status();
  return record_event(p);
}

Status CudaModelRunner::collect_profile() {
  for (size_t i = 1; i < events_used_; ++i) {
    float ms = 0.f;
    LATHE_CUDA_TRY(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    phase_ms_[static_cast<size_t>(event_phase_[i])] += ms;
  }
  ++profiled_steps_;
  return Status();
}

void CudaModelRunner::set_profiling(bool on) {
  profiling_ = on;
}

void CudaModelRunner::reset_profile() {
  phase_ms_.fill(0.0);
  profiled_steps_ = 0;
}

Status CudaModelRunner::run_forward(const ModelInput& in) {
  if (kv_.get() == nullptr)
    return internal_error("allocate_kv_cache() must be called before execute()");
  const auto t0 = Clock::now();
  LATHE_RETURN_IF_ERROR(check_step(in, limits_));
  const int32_t s_count = in.num_seqs(), t_count = in.num_tokens();
  const bool decode = t_count == s_count;
  int32_t bucket = decode && !options_.enforce_eager ? bucket_for(s_count) : 0;
  const bool graph = bucket > 0;
  const int64_t need = step_bytes(in, limits_, bucket);
  if (need > step_host_.bytes()) {
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    LATHE_RETURN_IF_ERROR(
        step_host_.allocate(std::max(need, 2 * step_host_.bytes()), "step inputs (host)"));
  }
  LATHE_RETURN_IF_ERROR(pack_step(in, limits_, bucket, graph, step_host_.as<uint8_t>(),
                                  step_host_.bytes(), step_dev_.bytes(), &packed_));
  times_.prepare_us = us_since(t0);
  times_.bucket = bucket;

  const auto t1 = Clock::now();
  LATHE_CUDA_TRY(cudaMemcpyAsync(step_dev_.get(), step_host_.get(),
                                 static_cast<size_t>(packed_.bytes), cudaMemcpyHostToDevice,
                                 stream_));
  const StepArrays d = StepArrays::at(step_dev_.get(), packed_.layout);
  recording_ = false;
  bool replayed = false;
  if (graph) {
    cudaGraphExec_t exec = graphs_.at(bucket);
    if (profiling_ && !profile_graphs_failed_) {
      auto it = profile_graphs_.find(bucket);
      if (it == profile_graphs_.end()) {
        // Captured on first use: the same kernels with event records between phases.
        cudaGraphExec_t pg = nullptr;
        const Status cs = capture_one(bucket, true, &pg);
        // capture_one packed its own dummy step: pack and copy this step again.
        LATHE_RETURN_IF_ERROR(pack_step(in, limits_, bucket, graph, step_host_.as<uint8_t>(),
                                        step_host_.bytes(), step_dev_.bytes(), &packed_));
        LATHE_CUDA_TRY(cudaMemcpyAsync(step_dev_.get(), step_host_.get(),
                                       static_cast<size_t>(packed_.bytes), cudaMemcpyHostToDevice,
                                       stream_));
        if (cs.is_ok()) {
          it = profile_graphs_.emplace(bucket, pg).first;
        } else {
          log_warning("CUDA: profiling with event nodes in graphs failed (" + cs.message() +
                      "); profiling decode steps eagerly");
          profile_graphs_failed_ = true;
        }
      }
      if (it != profile_graphs_.end()) {
        exec = it->second;
        events_used_ = profile_graph_events_;
      }
    }
    if (!profiling_ || !profile_graphs_failed_) {
      LATHE_CUDA_TRY(cudaGraphLaunch(exec, stream_));
      last_path_ = AttnPath::kDecode;
      replayed = true;
    }
  }
  times_.graph = replayed;
  if (!replayed) {
    AttnPath path =
        decode ? AttnPath::kDecode : (prefill_ ? AttnPath::kFlashInfer : AttnPath::kOwn);
    if (path == AttnPath::kFlashInfer) {
      const StepArrays h = StepArrays::at(step_host_.get(), packed_.layout);
      LATHE_RETURN_IF_ERROR(prefill_->plan(h.query_start, h.kv_indptr, s_count, stream_));
    }
    const int32_t splits =
        path == AttnPath::kFlashInfer
            ? 1
            : paged_attention_splits_for(t_count, config_.num_kv_heads, props_.sm_count);
    if (profiling_) {
      recording_ = true;
      LATHE_RETURN_IF_ERROR(record_start());
    }
    Status st = forward(d, packed_.num_tokens, packed_.num_seqs, packed_.num_lm_rows, path, splits);
    recording_ = false;
    LATHE_RETURN_IF_ERROR(st);
    last_path_ = path;
  }
  times_.launch_us = us_since(t1);
  return Status();
}

Status CudaModelRunner::sample(const PackedStep& p, PinnedBuffer& tokens_host,
                               PinnedBuffer& top_host) {
  const int32_t n = p.num_samples;
  if (n == 0) return Status();
  const DeviceSamplingRow* rows = StepArrays::at(step_dev_.get(), p.layout).sampling;
  const int32_t* banned =
      reinterpret_cast<const int32_t*>(step_dev_.as<uint8_t>() + p.banned_offset);
  const int32_t* history =
      reinterpret_cast<const int32_t*>(step_dev_.as<uint8_t>() + p.history_offset);
  if (p.needs_processing)
    LATHE_RETURN_IF_ERROR(process_logits(logits_.as<float>(), config_.vocab_size, rows, n, banned,
                                         history, counts_.as<int32_t>(), stream_));
  LATHE_RETURN_IF_ERROR(sample_tokens(logits_.as<float>(), config_.vocab_size, rows, n,
                                      sampled_.as<DeviceSampledToken>(),
                                      top_.as<DeviceTokenLogprob>(), stream_));
  if (profiling_) {
    recording_ = true;
    LATHE_RETURN_IF_ERROR(mark(Phase::kSampler));
    recording_ = false;
  }
  LATHE_CUDA_TRY(cudaMemcpyAsync(tokens_host.get(), sampled_.get(), sizeof(DeviceSampledToken) * n,
                                 cudaMemcpyDeviceToHost, stream_));
  if (p.needs_logprobs)
    LATHE_CUDA_TRY(cudaMemcpyAsync(top_host.get(), top_.get(),
                                   sizeof(DeviceTokenLogprob) * kMaxTopLogprobs * n,
                                   cudaMemcpyDeviceToHost, stream_));
  return Status();
}

Result<ModelOutput> CudaModelRunner::execute(const ModelInput& input) {
  LATHE_ASSIGN_OR_RETURN(const bool predicted, take_ahead(input));
  if (!predicted) {
    LATHE_RETURN_IF_ERROR(run_forward(input));
    const auto t1 = Clock::now();
    LATHE_RETURN_IF_ERROR(sample(packed_, sampled_host_, top_host_));
    LATHE_CUDA_TRY(cudaEventRecord(step_done_, stream_));
    times_.launch_us += us_since(t1);
  }
  const auto t1 = Clock::now();
  LATHE_RETURN_IF_ERROR(launch_ahead(input));
  times_.launch_us += us_since(t1);
  const auto t2 = Clock::now();
  LATHE_CUDA_TRY(cudaEventSynchronize(step_done_));
  times_.wait_us = us_since(t2);
  if (profiling_) LATHE_RETURN_IF_ERROR(collect_profile());

  const auto t3 = Clock::now();
  ModelOutput out;
  const int32_t n = packed_.num_samples;
  out.tokens.resize(static_cast<size_t>(n));
  const DeviceSampledToken* st = sampled_host_.as<DeviceSampledToken>();
  const DeviceTokenLogprob* top = top_host_.as<DeviceTokenLogprob>();
  for (int32_t i = 0; i < n; ++i) {
    SampledToken& o = out.tokens[static_cast<size_t>(i)];
    o.token = st[i].token;
    const int32_t k = input.sampling[static_cast<size_t>(i)].num_logprobs;
    if (k >= 0) {
      o.logprob = st[i].logprob;
      const int64_t m = std::min<int64_t>(k, config_.vocab_size);
      o.top_logprobs.reserve(static_cast<size_t>(m));
      for (int64_t j = 0; j < m; ++j) {
        const DeviceTokenLogprob& tl = top[static_cast<int64_t>(i) * kMaxTopLogprobs + j];
        o.top_logprobs.push_back(TokenLogprob{tl.token, tl.logprob});
      }
    }
  }
  // The predicted next step decodes the tokens just sampled.
  if (ahead_.pending)
    for (size_t i = 0; i < ahead_.expected.token_ids.size() && i < out.tokens.size(); ++i)
      ahead_.expected.token_ids[i] = out.tokens[i].token;
  times_.finish_us = us_since(t3);
  return out;
}

Result<std::vector<float>> CudaModelRunner::compute_logits(const ModelInput& input) {
  LATHE_RETURN_IF_ERROR(drop_ahead());
  LATHE_RETURN_IF_ERROR(run_forward(input));
  const int64_t v = config_.vocab_size;
  std::vector<float> rows(static_cast<size_t>(packed_.num_lm_rows) * static_cast<size_t>(v));
  LATHE_CUDA_TRY(cudaMemcpyAsync(rows.data(), logits_.get(), rows.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (profiling_) LATHE_RETURN_IF_ERROR(collect_profile());
  if (!times_.graph) {
    rows.resize(input.sample_seqs.size() * static_cast<size_t>(v));
    return rows;
  }
  std::vector<float> out(input.sample_seqs.size() * static_cast<size_t>(v));
  for (size_t i = 0; i < input.sample_seqs.size(); ++i)
    std::memcpy(out.data() + i * v, rows.data() + static_cast<int64_t>(input.sample_seqs[i]) * v,
                sizeof(float) * v);
  return out;
}

}  // namespace lathe::cuda