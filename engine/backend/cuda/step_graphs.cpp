// StepExecutor's decode CUDA graphs: one per bucket of padded batch size (1, 2, 4, then multiples
// of 8 up to max_num_seqs) for steps of one token per sequence, and, when the runner was asked for
// them (graph_query_len > 1), the same buckets for steps of that many tokens per sequence (a token
// and the draft tokens it verifies). Captured when the KV cache is allocated, after a warm-up that
// loads modules and caches cuBLASLt plans outside the capture.
#include <chrono>

#include "engine/backend/cuda/step_executor.h"
#include "engine/backend/cuda/step_upload.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

// A decode step of `b` sequences of `q` tokens each at positions [0, q) that writes no K/V (used
// to warm up and capture).
ModelInput dummy_decode(int32_t b, int32_t q) {
  ModelInput in;
  in.query_start.push_back(0);
  for (int32_t s = 0; s < b; ++s) {
    for (int32_t j = 0; j < q; ++j) {
      in.token_ids.push_back(0);
      in.positions.push_back(j);
      in.slot_mapping.push_back(-1);
    }
    in.query_start.push_back((s + 1) * q);
    in.seq_lens.push_back(q);
  }
  in.max_blocks_per_seq = 1;
  in.block_tables.assign(static_cast<size_t>(b), 0);
  in.max_seq_len = q;
  in.max_query_len = q;
  if (q > 1) {
    // A token and its drafts: every row sampled, as the steps this graph serves.
    for (int32_t s = 0; s < b; ++s) {
      in.sample_seqs.push_back(s);
      in.sample_counts.push_back(q);
    }
    in.sampling.resize(static_cast<size_t>(b) * q);
  }
  return in;
}

}  // namespace

void StepExecutor::destroy_graphs() {
  for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
  for (auto& [k, g] : profile_graphs_) cudaGraphExecDestroy(g);
  profile_graphs_.clear();
}

int32_t StepExecutor::bucket_for(int32_t num_seqs, int32_t q) const {
  for (const GraphKey& k : buckets_)
    if (k.second == q && k.first >= num_seqs) return graphs_.count(k) != 0 ? k.first : 0;
  return 0;
}

std::vector<int32_t> StepExecutor::graph_buckets(int32_t query_len) const {
  std::vector<int32_t> b;
  for (const GraphKey& k : buckets_)
    if (k.second == query_len && graphs_.count(k) != 0) b.push_back(k.first);
  return b;
}

Status StepExecutor::capture_one(int32_t b, int32_t q, bool with_events, cudaGraphExec_t* exec) {
  const ModelInput in = dummy_decode(b, q);
  LATHE_RETURN_IF_ERROR(
      upload_step(in, limits_, b, true, step_host_, step_dev_, &packed_, stream_, q));
  const AttnPath path = q == 1 ? AttnPath::kDecode : AttnPath::kOwn;
  const ForwardStep step = forward_step(packed_, path, model_.splits_for(AttnPath::kOwn, b * q));
  // Warm-up outside the capture: loads modules and caches cuBLASLt plans.
  LATHE_RETURN_IF_ERROR(model_.forward(step, kv_, nullptr));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (with_events) LATHE_RETURN_IF_ERROR(prof_.prepare(model_.config().num_layers));
  LATHE_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  Status s = with_events ? prof_.start(stream_, true) : Status();
  if (s.is_ok()) s = model_.forward(step, kv_, with_events ? &prof_ : nullptr);
  prof_.stop();
  if (with_events) profile_graph_events_ = prof_.events_used();
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

Status StepExecutor::capture_graphs() {
  buckets_.clear();
  const int32_t limit = std::min(options_.max_seqs, options_.max_tokens);
  std::vector<int32_t> sizes;
  for (int32_t b : {1, 2, 4})
    if (b <= limit) sizes.push_back(b);
  for (int32_t b = 8; b <= limit; b += 8) sizes.push_back(b);
  if (sizes.empty() || sizes.back() != limit) sizes.push_back(limit);
  for (int32_t b : sizes) buckets_.push_back({b, 1});
  const int32_t q = options_.graph_query_len;
  if (q > 1)
    for (int32_t b : sizes)
      if (int64_t{b} * q <= options_.max_tokens) buckets_.push_back({b, q});
  const auto t0 = std::chrono::steady_clock::now();
  for (const GraphKey& key : buckets_) {
    cudaGraphExec_t exec = nullptr;
    Status s = capture_one(key.first, key.second, false, &exec);
    if (!s.is_ok() && pdl_enabled()) {
      // Graph capture of programmatic (PDL) edges is the newest feature used here: fall back to
      // ordinary launches before giving up on graphs.
      log_warning("CUDA: capturing a decode graph with programmatic dependent launch failed (" +
                  s.message() + "); capturing without it");
      disable_pdl();
      destroy_graphs();
      return capture_graphs();
    }
    if (!s.is_ok()) {
      log_warning("CUDA: decode graphs unavailable (" + s.message() +
                  "); decode steps run eagerly");
      destroy_graphs();
      return Status();
    }
    graphs_[key] = exec;
  }
  log_info(strformat("CUDA: captured %zu decode graphs (batch 1..%d%s) in %.2f s", buckets_.size(),
                     limit, q > 1 ? strformat(", 1 and %d tokens per sequence", q).c_str() : "",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  return Status();
}

}  // namespace lathe::cuda
