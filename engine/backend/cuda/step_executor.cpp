#include "engine/backend/cuda/step_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/backend/cuda/process_logits.h"
#include "engine/backend/cuda/sample_tokens.h"
#include "engine/backend/cuda/step_upload.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/runtime/draft_acceptance.h"
#include "engine/runtime/next_decode_input.h"
#include "engine/runtime/sampling_params.h"
#include "engine/runtime/token_constraint.h"

namespace lathe::cuda {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Host staging for the variable part of a step (page lists, banned ids, penalty histories); grows.
constexpr int64_t kInitialTailBytes = int64_t{1} << 20;
// Banned ids per sampled row the device buffer reserves room for (EOS and stop ids).
constexpr int64_t kBannedPerRow = 256;
// At most this much device memory for banned ids and penalty histories of one step (64M tokens).
constexpr int64_t kMaxTailBytes = int64_t{256} << 20;

}  // namespace

StepExecutor::StepExecutor(CudaModel& model, CudaKvCache& kv, const StepExecutorOptions& options)
    : model_(model), kv_(kv), options_(options), stream_(model.stream()) {}

StepExecutor::~StepExecutor() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  destroy_graphs();
  if (step_done_ != nullptr) cudaEventDestroy(step_done_);
  if (ahead_done_ != nullptr) cudaEventDestroy(ahead_done_);
}

Status StepExecutor::allocate(int32_t block_size) {
  const ModelConfig& c = model_.config();
  const int64_t s = options_.max_seqs, v = c.vocab_size;
  // Sampled rows: one per sequence, or each sequence's token and its drafts.
  const int64_t rows = std::max<int64_t>(s, options_.max_sample_rows);
  limits_.max_tokens = options_.max_tokens;
  limits_.max_seqs = options_.max_seqs;
  limits_.block_size = block_size;
  limits_.num_blocks = kv_.layout().num_blocks;
  limits_.max_pages =
      static_cast<int64_t>(options_.max_seqs) * ceil_div(options_.max_model_len, block_size) +
      options_.max_seqs;
  limits_.vocab_size = v;
  limits_.max_logprobs = kMaxTopLogprobs;
  limits_.max_sample_rows = static_cast<int32_t>(rows);
  const int64_t fixed = StepLayout::make(options_.max_tokens, options_.max_seqs, rows).fixed_bytes;
  // Banned ids per row; a penalty history per sequence (a draft row extends its predecessor's);
  // logit bias entries (two words each) and an allowed-token mask per row.
  const int64_t tail = std::min(
      kMaxTailBytes,
      4 * (s * static_cast<int64_t>(options_.max_model_len) +
           rows * (kBannedPerRow + 1 + 2 * static_cast<int64_t>(kMaxLogitBias) + (v + 31) / 32)));
  LATHE_RETURN_IF_ERROR(
      step_dev_.allocate(fixed + 4 * limits_.max_pages + tail + 64, "step inputs"));
  LATHE_RETURN_IF_ERROR(
      step_host_.allocate(fixed + 4 * limits_.max_pages + kInitialTailBytes, "step inputs (host)"));
  LATHE_RETURN_IF_ERROR(ahead_step_host_.allocate(step_host_.bytes(), "step inputs (host)"));
  LATHE_RETURN_IF_ERROR(late_host_.allocate(step_host_.bytes(), "step inputs (host)"));
  if (counts_.get() != nullptr) return Status();  // sampler buffers do not depend on the block size
  LATHE_RETURN_IF_ERROR(counts_.allocate(rows * v * 4, "sampler penalty counts"));
  LATHE_CUDA_TRY(cudaMemsetAsync(counts_.get(), 0, static_cast<size_t>(counts_.bytes()), stream_));
  const int64_t sampled_bytes = rows * static_cast<int64_t>(sizeof(DeviceSampledToken));
  const int64_t top_bytes =
      rows * kMaxTopLogprobs * static_cast<int64_t>(sizeof(DeviceTokenLogprob));
  LATHE_RETURN_IF_ERROR(sampled_.allocate(sampled_bytes, "sampled tokens"));
  LATHE_RETURN_IF_ERROR(top_.allocate(top_bytes, "top logprobs"));
  LATHE_RETURN_IF_ERROR(sampled_host_.allocate(sampled_bytes, "sampled tokens (host)"));
  LATHE_RETURN_IF_ERROR(top_host_.allocate(top_bytes, "top logprobs (host)"));
  LATHE_RETURN_IF_ERROR(ahead_sampled_host_.allocate(sampled_bytes, "sampled tokens (host)"));
  LATHE_RETURN_IF_ERROR(ahead_top_host_.allocate(top_bytes, "top logprobs (host)"));
  LATHE_CUDA_TRY(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming));
  LATHE_CUDA_TRY(cudaEventCreateWithFlags(&ahead_done_, cudaEventDisableTiming));
  if (options_.mask_cache) {
    const int64_t slots = options_.mask_cache_slots > 0 ? options_.mask_cache_slots
                                                        : std::clamp<int64_t>(4 * rows, 64, 1024);
    LATHE_RETURN_IF_ERROR(
        mask_cache_.allocate(slots * 4 * ((v + 31) / 32), "allowed-token mask cache"));
    mask_slots_ = MaskSlotTable(static_cast<int32_t>(slots));
  }
  return Status();
}

Status StepExecutor::on_kv_changed(bool capture) {
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  ahead_.pending = false;  // finished with the stream; its graph is about to go
  destroy_graphs();
  limits_.num_blocks = kv_.layout().num_blocks;
  if (capture && !options_.enforce_eager && !kv_.empty()) LATHE_RETURN_IF_ERROR(capture_graphs());
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status();
}

ForwardStep StepExecutor::forward_step(const PackedStep& p, AttnPath path, int32_t splits) const {
  ForwardStep s;
  s.d = StepArrays::at(step_dev_.get(), p.layout);
  s.num_tokens = p.num_tokens;
  s.num_seqs = p.num_seqs;
  s.num_lm_rows = p.num_lm_rows;
  s.path = path;
  s.splits = splits;
  return s;
}

Status StepExecutor::run_forward(const ModelInput& in, MaskPacking masks) {
  if (kv_.empty()) return internal_error("allocate_kv_cache() must be called before execute()");
  const auto t0 = Clock::now();
  const int32_t s_count = in.num_seqs(), t_count = in.num_tokens();
  const bool decode = t_count == s_count;
  // Decode steps replay a graph: one token per sequence, or 1 + k when each carries k drafts.
  const int32_t q = decode ? 1 : multi_token_query_len(in);
  const int32_t bucket = q > 0 && !options_.enforce_eager ? bucket_for(s_count, q) : 0;
  const bool graph = bucket > 0;
  shape_ = UploadShape{bucket, graph, q > 0 ? q : 1};
  LATHE_RETURN_IF_ERROR(upload_step(in, limits_, bucket, graph, step_host_, step_dev_, &packed_,
                                    stream_, shape_.query_len, masks));
  times_.prepare_us = us_since(t0);
  times_.bucket = bucket;

  const auto t1 = Clock::now();
  bool replayed = false;
  if (graph) {
    const GraphKey key{bucket, q};
    cudaGraphExec_t exec = graphs_.at(key);
    if (profiling_ && !profile_graphs_failed_) {
      auto it = profile_graphs_.find(key);
      if (it == profile_graphs_.end()) {
        // Captured on first use: the same kernels with event records between phases.
        cudaGraphExec_t pg = nullptr;
        const Status cs = capture_one(bucket, q, true, &pg);
        // capture_one packed its own dummy step: pack and copy this step again.
        LATHE_RETURN_IF_ERROR(upload_step(in, limits_, bucket, graph, step_host_, step_dev_,
                                          &packed_, stream_, q, masks));
        if (cs.is_ok()) {
          it = profile_graphs_.emplace(key, pg).first;
        } else {
          log_warning("CUDA: profiling with event nodes in graphs failed (" + cs.message() +
                      "); profiling decode steps eagerly");
          profile_graphs_failed_ = true;
        }
      }
      if (it != profile_graphs_.end()) {
        exec = it->second;
        prof_.set_events_used(profile_graph_events_);
      }
    }
    if (!profiling_ || !profile_graphs_failed_) {
      LATHE_CUDA_TRY(cudaGraphLaunch(exec, stream_));
      replayed = true;
    }
  }
  times_.graph = replayed;
  if (!replayed) {
    const AttnPath path = model_.path_for(decode);
    if (path == AttnPath::kFlashInfer)
      LATHE_RETURN_IF_ERROR(
          model_.plan_prefill(StepArrays::at(step_host_.get(), packed_.layout), s_count));
    if (profiling_) LATHE_RETURN_IF_ERROR(prof_.start(stream_, false));
    const Status st = model_.forward(forward_step(packed_, path, model_.splits_for(path, t_count)),
                                     kv_, profiling_ ? &prof_ : nullptr);
    prof_.stop();
    LATHE_RETURN_IF_ERROR(st);
  }
  times_.launch_us = us_since(t1);
  return Status();
}

Status StepExecutor::upload_late_sampling(const ModelInput& in, const UploadShape& shape) {
  if (mask_cache_.get() == nullptr)
    return upload_step(in, limits_, shape.pad_to, shape.graph_rows, late_host_, step_dev_, &packed_,
                       stream_, shape.query_len, MaskPacking::kNow);
  // Rows whose mask the cache holds name its slot; a new mask is packed with the step (its first
  // row reads it there) and copied into the slot it was given, which later rows of this step and
  // later steps read: the copy is queued before the sampler.
  mask_slots_.begin_step();
  row_slots_.assign(in.sampling.size(), -1);
  mask_uploads_.clear();
  for (size_t i = 0; i < in.sampling.size(); ++i) {
    if (!in.sampling[i].is_constrained()) continue;
    const std::shared_ptr<const TokenMask> mask = row_mask(in.sampling[i]);
    if (!mask) continue;  // packed: all zero words, nothing allowed
    const MaskSlotTable::Slot slot = mask_slots_.find_or_assign(mask);
    if (slot.index < 0) continue;  // every slot is this step's: packed
    if (slot.fresh)
      mask_uploads_.emplace_back(i, slot.index);
    else
      row_slots_[i] = slot.index;
  }
  Status st = upload_step(in, limits_, shape.pad_to, shape.graph_rows, late_host_, step_dev_,
                          &packed_, stream_, shape.query_len, MaskPacking::kNow, row_slots_);
  const int64_t row_bytes = 4 * ((limits_.vocab_size + 31) / 32);
  const DeviceSamplingRow* packed_rows = StepArrays::at(late_host_.get(), packed_.layout).sampling;
  for (size_t u = 0; u < mask_uploads_.size() && st.is_ok(); ++u) {
    const auto [row, slot] = mask_uploads_[u];
    const uint8_t* src =
        step_dev_.as<uint8_t>() + packed_.mask_offset + 4 * int64_t{packed_rows[row].mask_begin};
    const cudaError_t err =
        cudaMemcpyAsync(mask_cache_.as<uint8_t>() + slot * row_bytes, src,
                        static_cast<size_t>(row_bytes), cudaMemcpyDeviceToDevice, stream_);
    if (err != cudaSuccess) st = cuda_error(err, "cudaMemcpyAsync(mask into the mask cache)");
  }
  // Slots given out above may not hold their masks now: start the cache over.
  if (!st.is_ok()) mask_slots_.clear();
  return st;
}

int32_t StepExecutor::multi_token_query_len(const ModelInput& in) const {
  const int32_t q = options_.graph_query_len;
  if (q <= 1 || in.num_tokens() != in.num_seqs() * q ||
      in.sample_seqs.size() != static_cast<size_t>(in.num_seqs()))
    return 0;
  for (int32_t s = 0; s < in.num_seqs(); ++s)
    if (in.query_start[s + 1] - in.query_start[s] != q || in.sample_count(s) != q) return 0;
  return q;
}

Status StepExecutor::sample(const PackedStep& p, PinnedBuffer& tokens_host,
                            PinnedBuffer& top_host) {
  const int32_t n = p.num_samples;
  if (n == 0) return Status();
  const int64_t vocab = model_.config().vocab_size;
  float* logits = model_.activations().logits.as<float>();
  const DeviceSamplingRow* rows = StepArrays::at(step_dev_.get(), p.layout).sampling;
  const int32_t* banned =
      reinterpret_cast<const int32_t*>(step_dev_.as<uint8_t>() + p.banned_offset);
  const int32_t* history =
      reinterpret_cast<const int32_t*>(step_dev_.as<uint8_t>() + p.history_offset);
  const DeviceTokenBias* biases =
      reinterpret_cast<const DeviceTokenBias*>(step_dev_.as<uint8_t>() + p.bias_offset);
  const uint32_t* step_words =
      reinterpret_cast<const uint32_t*>(step_dev_.as<uint8_t>() + p.mask_offset);
  const uint32_t* cache_words = mask_cache_.as<uint32_t>();
  // Masks are read by the sampler, or (the switch off) written over the logits before it.
  const bool masks_in_sampler = options_.sampler_masks;
  if (p.needs_processing || (p.has_masks && !masks_in_sampler))
    LATHE_RETURN_IF_ERROR(process_logits(logits, vocab, rows, n, banned, history, biases,
                                         step_words, cache_words, !masks_in_sampler,
                                         counts_.as<int32_t>(), stream_));
  LATHE_RETURN_IF_ERROR(sample_tokens(
      logits, vocab, rows, n, sampled_.as<DeviceSampledToken>(), top_.as<DeviceTokenLogprob>(),
      stream_, masks_in_sampler ? step_words : nullptr, masks_in_sampler ? cache_words : nullptr));
  if (profiling_) LATHE_RETURN_IF_ERROR(prof_.mark_once(Phase::kSampler, stream_));
  LATHE_CUDA_TRY(cudaMemcpyAsync(tokens_host.get(), sampled_.get(), sizeof(DeviceSampledToken) * n,
                                 cudaMemcpyDeviceToHost, stream_));
  if (p.needs_logprobs)
    LATHE_CUDA_TRY(cudaMemcpyAsync(top_host.get(), top_.get(),
                                   sizeof(DeviceTokenLogprob) * kMaxTopLogprobs * n,
                                   cudaMemcpyDeviceToHost, stream_));
  return Status();
}

Result<ModelOutput> StepExecutor::execute(const ModelInput& input) {
  // The switch off: every mask looked up before anything is launched (a miss delays the launch),
  // as when the engine looked them up while building the input.
  if (!options_.mask_lookup_late)
    for (const SamplingRow& row : input.sampling) (void)row_mask(row);
  LATHE_ASSIGN_OR_RETURN(const bool predicted, take_ahead(input));
  if (!predicted) {
    // Constrained rows: the masks are packed while the GPU runs the forward pass.
    const bool late = has_constrained_rows(input);
    LATHE_RETURN_IF_ERROR(run_forward(input, late ? MaskPacking::kLater : MaskPacking::kNow));
    const auto t1 = Clock::now();
    if (late) LATHE_RETURN_IF_ERROR(upload_late_sampling(input, shape_));
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
  if (profiling_) LATHE_RETURN_IF_ERROR(prof_.collect());

  const auto t3 = Clock::now();
  ModelOutput out;
  const int32_t n = packed_.num_samples;
  const int64_t vocab = model_.config().vocab_size;
  out.tokens.resize(static_cast<size_t>(n));
  const DeviceSampledToken* st = sampled_host_.as<DeviceSampledToken>();
  const DeviceTokenLogprob* top = top_host_.as<DeviceTokenLogprob>();
  for (int32_t i = 0; i < n; ++i) {
    SampledToken& o = out.tokens[static_cast<size_t>(i)];
    o.token = st[i].token;
    const int32_t k = input.sampling[static_cast<size_t>(i)].num_logprobs;
    if (k >= 0) {
      o.logprob = st[i].logprob;
      const int64_t m = std::min<int64_t>(k, vocab);
      o.top_logprobs.reserve(static_cast<size_t>(m));
      for (int64_t j = 0; j < m; ++j) {
        const DeviceTokenLogprob& tl = top[static_cast<int64_t>(i) * kMaxTopLogprobs + j];
        o.top_logprobs.push_back(TokenLogprob{tl.token, tl.logprob});
      }
    }
  }
  // With drafts: the rows sampled above become each sequence's accepted tokens.
  if (input.has_drafts()) LATHE_RETURN_IF_ERROR(accept_draft_tokens(input, &out));
  // The predicted next step decodes the tokens just sampled (steps with drafts predict none).
  if (ahead_.pending)
    for (size_t i = 0; i < ahead_.expected.token_ids.size() && i < out.tokens.size(); ++i)
      ahead_.expected.token_ids[i] = out.tokens[i].token;
  times_.finish_us = us_since(t3);
  return out;
}

Result<std::vector<float>> StepExecutor::compute_logits(const ModelInput& input) {
  LATHE_RETURN_IF_ERROR(drop_ahead());
  LATHE_RETURN_IF_ERROR(run_forward(input));
  const int64_t v = model_.config().vocab_size;
  std::vector<float> rows(static_cast<size_t>(packed_.num_lm_rows) * static_cast<size_t>(v));
  LATHE_CUDA_TRY(cudaMemcpyAsync(rows.data(), model_.activations().logits.get(),
                                 rows.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (profiling_) LATHE_RETURN_IF_ERROR(prof_.collect());
  if (!times_.graph) {
    rows.resize(static_cast<size_t>(input.num_sample_rows()) * static_cast<size_t>(v));
    return rows;
  }
  // A graph computed logits for every row of its bucket: keep the sampled rows, in order.
  std::vector<float> out(static_cast<size_t>(input.num_sample_rows()) * static_cast<size_t>(v));
  size_t r = 0;
  for (size_t i = 0; i < input.sample_seqs.size(); ++i) {
    const int32_t end = input.query_start[input.sample_seqs[i] + 1];
    for (int32_t row = end - input.sample_count(i); row < end; ++row, ++r)
      std::memcpy(out.data() + r * v, rows.data() + static_cast<int64_t>(row) * v,
                  sizeof(float) * v);
  }
  return out;
}

}  // namespace lathe::cuda
