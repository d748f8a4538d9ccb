// Runs engine steps of a CudaModel over a KV cache: the inputs onto the device (one pinned copy per
// step), the decode CUDA graphs (step_graphs.cpp), the sampler on the device, the copy of the
// sampled tokens back, and the lookahead (step_lookahead.cpp).
//
// A step: check and pack the inputs on the host (step_inputs.h), one asynchronous copy to the
// device, then either replay the CUDA graph of the step's bucket (decode-only steps of up to
// max_num_seqs sequences of one token each, padded to the bucket; and of graph_query_len tokens
// each when the runner was asked for those) or launch the model's ops eagerly (prefill and mixed
// steps), then the sampler, one copy of the sampled tokens back, one synchronization. Every buffer
// is allocated at creation or when the KV cache is; serving never allocates device memory.
//
// Lookahead: after launching a decode step of at most lookahead_max_seqs sequences whose input says
// the next step continues them, the executor launches that next step too (predict_next_decode:
// positions + 1; the sampled ids are copied into its token ids on the device) before waiting for
// this one, so the GPU does not idle through the host's turn. The next execute() compares its
// input with the prediction: equal, the step is already running; different, it waits for the
// predicted step, drops it and runs the real one. A dropped step only wrote K/V at its sequences'
// next positions, inside blocks they held, which the real steps (or a block's next owner)
// overwrite before anything reads them.
//
// Late-bound sampling rows (constrained decoding): a constrained row's mask (SamplingRow::allowed,
// or looked up from its constraint with row_mask(), which the engine leaves to the runner) follows
// from the token the step before samples, so a step with constrained rows is packed
// without its masks (MaskPacking::kLater) and its forward pass launched; its sampler is enqueued
// behind it only once its real rows are known: packed again with them into late_host_, one more
// copy, then the sampler. For a predicted step that is the next execute(), which takes the real
// input when the forward passes agree (same_forward) while the predicted forward pass runs; for
// any other step it is right after the launch, so the host looks the masks up (a hash hit, or on a
// grammar cache miss a walk of the vocabulary: about a millisecond at 152k tokens) and packs them
// while the GPU runs the forward pass. The forward pass of a decode step takes milliseconds, the
// host's part tens of microseconds: the sampler is enqueued before the GPU reaches it.
//
// Masks on the device (constrained decoding): a late-bound step names, per constrained row, the
// slot of a device-resident copy of its mask (mask_slot_table.h; a grammar revisits its states, so
// most steps upload no mask at all); a mask not yet held is packed with the step once and copied
// into a slot behind the upload. The sampler reads each row's mask with its logits
// (sample_tokens.h), so no pass writes -inf over the masked tokens. At 152k tokens a mask is
// 19 KB: batch 64 sent 1.2 MB a step before.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_model.h"
#include "engine/backend/cuda/kv_cache.h"
#include "engine/backend/cuda/mask_slot_table.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/backend/cuda/step_profiler.h"
#include "engine/runtime/model_io.h"

namespace lathe::cuda {

// Wall-clock host time of the last execute(), microseconds.
struct StepTimes {
  double prepare_us = 0;  // checking and packing the inputs
  double launch_us = 0;   // copies, graph launch or kernel launches, sampler launches
  double wait_us = 0;     // waiting for the GPU
  double finish_us = 0;   // building the ModelOutput
  bool graph = false;     // replayed a CUDA graph
  int32_t bucket = 0;     // graph bucket (padded batch) when graph
};

struct StepExecutorOptions {
  int32_t max_tokens = 8192;
  int32_t max_seqs = 256;
  int32_t max_model_len = 0;
  bool enforce_eager = false;
  int32_t lookahead_max_seqs = 1;  // 0: no lookahead
  int32_t max_sample_rows = 0;     // sampled rows per step (0: max_seqs); drafts add rows
  int32_t graph_query_len = 0;     // > 1: graphs for decode steps of this many tokens per sequence
  // Constrained decoding (CudaSwitches): masks looked up after the forward pass is launched, held
  // on the device between steps, applied by the sampler as it reads.
  bool mask_lookup_late = true;
  bool mask_cache = true;
  bool sampler_masks = true;
  // 0: four times the sampled rows, 64 to 1024 (a grammar caches at most 1024 masks).
  int32_t mask_cache_slots = 0;
};

class StepExecutor {
 public:
  StepExecutor(CudaModel& model, CudaKvCache& kv, const StepExecutorOptions& options);
  ~StepExecutor();
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  // Step and sampler buffers for the limits (block_size: the cache's; num_blocks: 0 until the
  // cache exists).
  Status allocate(int32_t block_size);
  // The cache changed (allocated, resized, or a temporary one for profiling): graphs are dropped
  // and, when capture is true and not eager, captured again for the new cache.
  Status on_kv_changed(bool capture);

  Result<ModelOutput> execute(const ModelInput& input);
  Result<std::vector<float>> compute_logits(const ModelInput& input);

  const StepTimes& times() const { return times_; }
  int64_t lookahead_hits() const { return lookahead_hits_; }
  int64_t lookahead_misses() const { return lookahead_misses_; }
  const MaskSlotTable& mask_slots() const { return mask_slots_; }
  void set_profiling(bool on) { profiling_ = on; }
  StepProfiler& profiler() { return prof_; }
  // Decode buckets with a captured graph, by query length (1: one token per sequence).
  std::vector<int32_t> graph_buckets(int32_t query_len = 1) const;
  const StepLimits& limits() const { return limits_; }

 private:
  // Graphs by (padded batch, tokens per sequence).
  using GraphKey = std::pair<int32_t, int32_t>;

  Status capture_graphs();
  // Warms up and captures the decode step of `b` sequences of `q` tokens (with event records
  // between phases when with_events, for the profiling mode).
  Status capture_one(int32_t b, int32_t q, bool with_events, cudaGraphExec_t* exec);
  void destroy_graphs();
  // The graph bucket for a decode step of num_seqs sequences of q tokens each; 0 when none.
  int32_t bucket_for(int32_t num_seqs, int32_t q) const;
  // The tokens per sequence of a step a graph of query length > 1 can run: every sequence carries
  // graph_query_len tokens and samples all of them. 0 otherwise.
  int32_t multi_token_query_len(const ModelInput& in) const;
  // The step's forward description over the packed device arrays.
  ForwardStep forward_step(const PackedStep& p, AttnPath path, int32_t splits) const;
  // How a step was packed (upload_step()'s padding arguments), to pack it again the same way.
  struct UploadShape {
    int32_t pad_to = 0;
    bool graph_rows = false;
    int32_t query_len = 1;
  };

  // Packs, copies and runs the forward pass up to the logits. Leaves the packed step in packed_
  // and how it was packed in shape_; with MaskPacking::kLater the rows' masks are not packed.
  Status run_forward(const ModelInput& input, MaskPacking masks = MaskPacking::kNow);
  // Late-bound sampling rows: packs `in` again as `shape` says, masks included (looked up now, by
  // slot of the mask cache when it is on), into late_host_ and copies it behind the forward pass
  // already enqueued (which reads the same values from the part they share), then copies the masks
  // new to the cache into their slots. Leaves the packed step in packed_.
  Status upload_late_sampling(const ModelInput& in, const UploadShape& shape);
  // The sampler for a packed step, then copies of its tokens (and top logprobs) into the host
  // buffers given.
  Status sample(const PackedStep& p, PinnedBuffer& tokens_host, PinnedBuffer& top_host);
  // Lookahead (step_lookahead.cpp). launch_ahead: after step `in` is launched, launches its
  // predicted successor when allowed (its sampler too, unless it has constrained rows). take_ahead:
  // whether `in` is the pending predicted step (then it becomes the current one, and a step left
  // without its sampler gets it, with `in`'s rows); on a miss waits for the predicted step and
  // drops it. drop_ahead: the same for callers other than execute().
  Status launch_ahead(const ModelInput& in);
  Result<bool> take_ahead(const ModelInput& in);
  Status drop_ahead();

  CudaModel& model_;
  CudaKvCache& kv_;
  StepExecutorOptions options_;
  cudaStream_t stream_;
  StepLimits limits_;

  DeviceBuffer step_dev_;
  PinnedBuffer step_host_;
  PackedStep packed_;
  UploadShape shape_;
  // The repacked step with its masks (late-bound sampling rows). No copy from it is in flight
  // when execute() starts: the last one was before the sampler of the step it waited for.
  PinnedBuffer late_host_;
  DeviceBuffer counts_, sampled_, top_;
  // The device mask cache: mask_slots_.num_slots() rows of ceil(V / 32) words (empty when off).
  DeviceBuffer mask_cache_;
  MaskSlotTable mask_slots_;
  std::vector<int32_t> row_slots_;  // per sampled row of the step being packed (MaskSlots)
  std::vector<std::pair<size_t, int32_t>> mask_uploads_;  // (row, slot): packed, then copied
  PinnedBuffer sampled_host_, top_host_;
  cudaEvent_t step_done_ = nullptr;  // recorded after the current step's copies to the host

  // Lookahead: the predicted step in flight, with its own host buffers and completion event
  // (swapped with the current step's on a hit).
  struct Ahead {
    bool pending = false;  // launched and not yet taken or dropped
    // Launched without its sampler (constrained rows): execute() samples it with the real rows.
    bool late_sampling = false;
    ModelInput expected;  // its input; token ids set once the current step's tokens are read
    PackedStep packed;
  };
  Ahead ahead_;
  PinnedBuffer ahead_step_host_, ahead_sampled_host_, ahead_top_host_;
  cudaEvent_t ahead_done_ = nullptr;
  int64_t lookahead_hits_ = 0, lookahead_misses_ = 0;

  std::vector<GraphKey> buckets_;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  std::map<GraphKey, cudaGraphExec_t> profile_graphs_;

  StepTimes times_;
  StepProfiler prof_;
  bool profiling_ = false;
  bool profile_graphs_failed_ = false;
  size_t profile_graph_events_ = 0;
};

}  // namespace lathe::cuda
