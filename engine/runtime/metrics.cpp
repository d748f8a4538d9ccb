#include "engine/runtime/metrics.h"

#include <algorithm>

namespace lathe {

namespace {

constexpr size_t kMaxSeriesPoints = 4096;
constexpr double kWindowLong = 10.0;  // seconds
constexpr double kWindowShort = 1.0;  // seconds
constexpr int64_t kBucketMs = 100;
constexpr int64_t kLongBuckets = 100;  // kWindowLong / kBucketMs
constexpr int64_t kShortBuckets = 10;

template <typename Point>
void append_bounded(std::deque<Point>& series, Point p) {
  series.push_back(std::move(p));
  while (series.size() > kMaxSeriesPoints) series.pop_front();
}

template <typename Point>
std::vector<Point> since(const std::deque<Point>& series, uint64_t cursor, uint64_t* next) {
  std::vector<Point> out;
  for (const Point& p : series)
    if (p.seq > cursor) out.push_back(p);
  *next = series.empty() ? cursor : std::max(cursor, series.back().seq);
  return out;
}

}  // namespace

MetricsRegistry::MetricsRegistry(const MetricsOptions& options)
    : options_(options),
      start_(Clock::now()),
      ttft_(ttft_buckets_s()),
      itl_(itl_buckets_s()),
      tpot_(itl_buckets_s()),
      e2e_(request_latency_buckets_s()),
      queue_(request_latency_buckets_s()),
      prompt_len_(one_two_five_buckets(options.max_model_len)),
      generation_len_(one_two_five_buckets(options.max_model_len)),
      tokens_per_step_(power_of_two_buckets(options.max_num_batched_tokens)),
      window_(kNumBuckets) {
  state_.max_num_seqs = options.max_num_seqs;
  state_.kv_blocks_total = options.kv_blocks_total;
  state_.kv_blocks_free = options.kv_blocks_total;
  state_.kv_block_size = options.kv_block_size;
}

void MetricsRegistry::record(const MetricsUpdate& u) {
  std::lock_guard<std::mutex> lock(mutex_);
  MetricsSnapshot& s = state_;
  if (u.load) {
    s.num_requests_running = u.load->num_running;
    s.num_requests_waiting = u.load->num_waiting;
    s.kv_blocks_used = u.load->kv_blocks_used;
    s.kv_blocks_cached = u.load->kv_blocks_cached;
    s.kv_blocks_free = u.load->kv_blocks_free;
    s.kv_cache_usage =
        s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0;
  }

  if (u.is_step) {
    ++s.num_steps;
    s.slot_steps_busy += u.num_scheduled_seqs;
    s.slot_steps_total += options_.max_num_seqs;
    tokens_per_step_.observe(u.num_batched_tokens);
  }
  if (u.is_step || u.num_prefill_tokens > 0 || u.num_generated_tokens > 0) {
    const int64_t id = bucket_id(u.time);
    WindowBucket& b =
        window_[static_cast<size_t>(((id % kNumBuckets) + kNumBuckets) % kNumBuckets)];
    if (b.id != id) b = WindowBucket{id};
    b.prefill_tokens += u.num_prefill_tokens;
    b.generated_tokens += u.num_generated_tokens;
    b.busy_slots += u.num_scheduled_seqs;
    b.steps += u.is_step ? 1 : 0;
  }
  s.generation_tokens += u.num_generated_tokens;
  s.prefill_tokens_computed += u.num_prefill_tokens;
  s.num_preemptions += u.num_preemptions;
  s.spec_decode_num_drafts += u.num_spec_drafts;
  s.spec_decode_num_draft_tokens += u.num_draft_tokens;
  s.spec_decode_num_accepted_tokens += u.num_accepted_tokens;
  s.prefix_cache_queries += u.prefix_cache_queries;
  s.prefix_cache_hits += u.prefix_cache_hits;
  for (double v : u.itl_s) itl_.observe(v);

  const double now_s = seconds(u.time - start_);
  for (const FirstTokenRecord& f : u.first_tokens) {
    s.prompt_tokens += f.prompt_tokens;
    ttft_.observe(f.ttft_s);
    queue_.observe(f.queue_s);
    prompt_len_.observe(f.prompt_tokens);
    append_bounded(ttft_points_, TtftPoint{next_ttft_seq_++, f.id, now_s, f.ttft_s});
  }
  for (const FinishedRequestPoint& f : u.finished) {
    switch (f.reason) {
      case FinishReason::kStop:
        ++s.requests_finished_stop;
        break;
      case FinishReason::kLength:
        ++s.requests_finished_length;
        break;
      case FinishReason::kAbort:
        ++s.requests_finished_abort;
        break;
      default:
        ++s.requests_finished_error;
        break;
    }
    e2e_.observe(f.e2e_s);
    generation_len_.observe(f.generation_tokens);
    if (f.generation_tokens > 1 && f.ttft_s >= 0.0)
      tpot_.observe((f.e2e_s - f.ttft_s) / (f.generation_tokens - 1));
    FinishedRequestPoint p = f;
    p.seq = next_finished_seq_++;
    p.time_s = now_s;
    append_bounded(finished_points_, std::move(p));
  }
}

int64_t MetricsRegistry::bucket_id(Clock::time_point t) const {
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - start_).count();
  return ms >= 0 ? ms / kBucketMs : -((-ms + kBucketMs - 1) / kBucketMs);
}

MetricsSnapshot MetricsRegistry::snapshot(uint64_t ttft_cursor, uint64_t finished_cursor) const {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_locked(now, ttft_cursor, finished_cursor);
}

MetricsSnapshot MetricsRegistry::snapshot_locked(Clock::time_point now, uint64_t ttft_cursor,
                                                 uint64_t finished_cursor) const {
  MetricsSnapshot s = state_;
  s.time_s = seconds(now - start_);
  s.prefix_cache_hit_rate =
      s.prefix_cache_queries > 0
          ? static_cast<double>(s.prefix_cache_hits) / static_cast<double>(s.prefix_cache_queries)
          : 0.0;
  s.slot_utilization = s.slot_steps_total > 0 ? static_cast<double>(s.slot_steps_busy) /
                                                    static_cast<double>(s.slot_steps_total)
                                              : 0.0;
  s.spec_decode_acceptance_rate = s.spec_decode_num_draft_tokens > 0
                                      ? static_cast<double>(s.spec_decode_num_accepted_tokens) /
                                            static_cast<double>(s.spec_decode_num_draft_tokens)
                                      : 0.0;
  int64_t p1 = 0, p10 = 0, g1 = 0, g10 = 0, busy10 = 0, steps10 = 0;
  const int64_t now_id = bucket_id(now);
  for (const WindowBucket& b : window_) {
    if (b.id == INT64_MIN) continue;    // never used (now_id - INT64_MIN would overflow)
    const int64_t age = now_id - b.id;  // in buckets; the current one is 0
    if (age < 0 || age >= kLongBuckets) continue;
    p10 += b.prefill_tokens;
    g10 += b.generated_tokens;
    busy10 += b.busy_slots;
    steps10 += b.steps;
    if (age < kShortBuckets) {
      p1 += b.prefill_tokens;
      g1 += b.generated_tokens;
    }
  }
  s.prompt_tokens_per_s_1s = static_cast<double>(p1) / kWindowShort;
  s.prompt_tokens_per_s_10s = static_cast<double>(p10) / kWindowLong;
  s.generation_tokens_per_s_1s = static_cast<double>(g1) / kWindowShort;
  s.generation_tokens_per_s_10s = static_cast<double>(g10) / kWindowLong;
  s.slot_utilization_10s = steps10 > 0 ? static_cast<double>(busy10) /
                                             static_cast<double>(steps10 * options_.max_num_seqs)
                                       : 0.0;
  s.ttft_s = ttft_.data();
  s.itl_s = itl_.data();
  s.tpot_s = tpot_.data();
  s.e2e_s = e2e_.data();
  s.queue_s = queue_.data();
  s.prompt_len = prompt_len_.data();
  s.generation_len = generation_len_.data();
  s.tokens_per_step = tokens_per_step_.data();
  s.ttft_points = since(ttft_points_, ttft_cursor, &s.ttft_cursor);
  s.finished = since(finished_points_, finished_cursor, &s.finished_cursor);
  return s;
}

void MetricsRegistry::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  MetricsSnapshot& s = state_;
  s.num_steps = s.prompt_tokens = s.generation_tokens = s.prefill_tokens_computed = 0;
  s.prefix_cache_queries = s.prefix_cache_hits = s.num_preemptions = 0;
  s.requests_finished_stop = s.requests_finished_length = 0;
  s.requests_finished_abort = s.requests_finished_error = 0;
  s.slot_steps_busy = s.slot_steps_total = 0;
  s.spec_decode_num_drafts = s.spec_decode_num_draft_tokens = 0;
  s.spec_decode_num_accepted_tokens = 0;
  for (Histogram* h :
       {&ttft_, &itl_, &tpot_, &e2e_, &queue_, &prompt_len_, &generation_len_, &tokens_per_step_})
    h->reset();
  window_.assign(kNumBuckets, WindowBucket{});
  // Series keep their sequence numbers growing so that readers' cursors stay valid.
  ttft_points_.clear();
  finished_points_.clear();
}

}  // namespace lathe
