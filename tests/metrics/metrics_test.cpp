// The metrics registry: every gauge, counter, histogram and throughput window; the snapshot's
// consistency; the TTFT / finished-request series; and the Prometheus text, checked by a format
// validator (prometheus_validator.h) that is itself tested against broken inputs.
#include <QtTest>

#include <atomic>
#include <cmath>
#include <thread>

#include "engine/runtime/metrics.h"
#include "prometheus_validator.h"
#include "test_support.h"

using namespace lathe;
using namespace std::chrono_literals;

namespace {

MetricsOptions options() {
  MetricsOptions o;
  o.model_name = "tiny \"test\" model";
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 64;
  o.max_model_len = 256;
  o.kv_blocks_total = 100;
  o.kv_block_size = 16;
  return o;
}

EngineLoad load(int running, int waiting, int used, int cached) {
  EngineLoad l;
  l.num_running = running;
  l.num_waiting = waiting;
  l.kv_blocks_used = used;
  l.kv_blocks_cached = cached;
  l.kv_blocks_free = 100 - used - cached;
  return l;
}

FinishedRequestPoint finished(RequestId id, FinishReason reason, int prompt, int gen, double ttft,
                              double e2e) {
  FinishedRequestPoint f;
  f.id = id;
  f.reason = reason;
  f.prompt_tokens = prompt;
  f.generation_tokens = gen;
  f.ttft_s = ttft;
  f.e2e_s = e2e;
  return f;
}

}  // namespace

class MetricsTest : public QObject {
  Q_OBJECT
 private slots:
  void histogram_buckets_are_inclusive_upper_bounds() {
    Histogram h({1.0, 2.0, 5.0});
    for (double v : {0.5, 1.0, 1.5, 2.0, 5.0, 7.0, 100.0}) h.observe(v);
    const HistogramData& d = h.data();
    QCOMPARE(d.counts, (std::vector<uint64_t>{2, 2, 1, 2}));
    QCOMPARE(d.count, uint64_t{7});
    QCOMPARE(d.sum, 117.0);
    h.observe(std::nan(""));  // ignored
    QCOMPARE(h.data().count, uint64_t{7});
  }

  void histogram_quantiles_interpolate_like_prometheus() {
    Histogram h({1.0, 2.0, 4.0});
    for (int i = 0; i < 10; ++i) h.observe(1.5);  // all in (1, 2]
    QCOMPARE(h.data().quantile(0.5), 1.5);
    QCOMPARE(h.data().quantile(1.0), 2.0);
    Histogram empty({1.0});
    QCOMPARE(empty.data().quantile(0.9), 0.0);
    QCOMPARE(one_two_five_buckets(300), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
    QCOMPARE(power_of_two_buckets(64), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  }

  void gauges_show_the_latest_state() {
    MetricsRegistry m(options());
    MetricsSnapshot s = m.snapshot();
    QCOMPARE(s.kv_blocks_total, 100);
    QCOMPARE(s.kv_blocks_free, 100);
    QCOMPARE(s.max_num_seqs, 4);
    QCOMPARE(s.kv_block_size, 16);
    MetricsUpdate u;
    u.time = Clock::now();
    u.load = load(3, 7, 40, 10);
    m.record(u);
    s = m.snapshot();
    QCOMPARE(s.num_requests_running, 3);
    QCOMPARE(s.num_requests_waiting, 7);
    QCOMPARE(s.kv_blocks_used, 40);
    QCOMPARE(s.kv_blocks_cached, 10);
    QCOMPARE(s.kv_blocks_free, 50);
    QCOMPARE(s.kv_cache_usage, 0.4);
    QCOMPARE(s.kv_blocks_used + s.kv_blocks_cached + s.kv_blocks_free, s.kv_blocks_total);
  }

  void counters_accumulate() {
    MetricsRegistry m(options());
    for (int i = 0; i < 3; ++i) {
      MetricsUpdate u;
      u.time = Clock::now();
      u.is_step = true;
      u.num_scheduled_seqs = 2;
      u.num_batched_tokens = 20;
      u.num_prefill_tokens = 18;
      u.num_generated_tokens = 2;
      u.num_preemptions = 1;
      u.prefix_cache_queries = 100;
      u.prefix_cache_hits = 25;
      u.first_tokens.push_back({RequestId(i + 1), 0.5, 0.1, 18});
      m.record(u);
    }
    MetricsUpdate fin;
    fin.time = Clock::now();
    fin.finished = {finished(1, FinishReason::kStop, 18, 5, 0.5, 1.0),
                    finished(2, FinishReason::kLength, 18, 5, 0.5, 1.0),
                    finished(3, FinishReason::kAbort, 18, 0, -1.0, 0.2),
                    finished(4, FinishReason::kError, 18, 0, -1.0, 0.2),
                    finished(5, FinishReason::kStop, 18, 1, 0.5, 0.5)};
    m.record(fin);
    const MetricsSnapshot s = m.snapshot();
    QCOMPARE(s.num_steps, int64_t{3});
    QCOMPARE(s.prompt_tokens, int64_t{54});
    QCOMPARE(s.generation_tokens, int64_t{6});
    QCOMPARE(s.prefill_tokens_computed, int64_t{54});
    QCOMPARE(s.num_preemptions, int64_t{3});
    QCOMPARE(s.prefix_cache_queries, int64_t{300});
    QCOMPARE(s.prefix_cache_hits, int64_t{75});
    QCOMPARE(s.prefix_cache_hit_rate, 0.25);
    QCOMPARE(s.requests_finished_stop, int64_t{2});
    QCOMPARE(s.requests_finished_length, int64_t{1});
    QCOMPARE(s.requests_finished_abort, int64_t{1});
    QCOMPARE(s.requests_finished_error, int64_t{1});
    QCOMPARE(s.slot_steps_busy, int64_t{6});
    QCOMPARE(s.slot_steps_total, int64_t{12});
    QCOMPARE(s.slot_utilization, 0.5);
    QCOMPARE(s.kv_blocks_free, 100);  // updates without a load leave the gauges as they were
  }

  void latency_and_length_histograms_record_each_request() {
    MetricsRegistry m(options());
    MetricsUpdate u;
    u.time = Clock::now();
    u.is_step = true;
    u.num_batched_tokens = 33;
    u.itl_s = {0.02, 0.03};
    u.first_tokens.push_back({7, 0.25, 0.05, 120});
    u.finished.push_back(finished(7, FinishReason::kStop, 120, 11, 0.25, 1.25));
    m.record(u);
    const MetricsSnapshot s = m.snapshot();
    QCOMPARE(s.ttft_s.count, uint64_t{1});
    QCOMPARE(s.ttft_s.sum, 0.25);
    QCOMPARE(s.queue_s.sum, 0.05);
    QCOMPARE(s.itl_s.count, uint64_t{2});
    QCOMPARE(s.itl_s.sum, 0.05);
    QCOMPARE(s.e2e_s.sum, 1.25);
    QCOMPARE(s.tpot_s.count, uint64_t{1});
    QCOMPARE(s.tpot_s.sum, 0.1);  // (1.25 - 0.25) / (11 - 1)
    QCOMPARE(s.prompt_len.sum, 120.0);
    QCOMPARE(s.generation_len.sum, 11.0);
    QCOMPARE(s.tokens_per_step.count, uint64_t{1});
    QCOMPARE(s.tokens_per_step.counts[6], uint64_t{1});  // 33 is in (32, 64]
  }

  void throughput_uses_sliding_windows() {
    MetricsRegistry m(options());
    const Clock::time_point now = Clock::now();
    auto step = [&](Clock::duration age, int prefill, int gen, int seqs) {
      MetricsUpdate u;
      u.time = now - age;
      u.is_step = true;
      u.num_prefill_tokens = prefill;
      u.num_generated_tokens = gen;
      u.num_scheduled_seqs = seqs;
      m.record(u);
    };
    step(30s, 1000, 1000, 4);  // too old for either window
    step(5s, 300, 50, 2);      // in the 10 s window only
    step(200ms, 100, 20, 4);   // in both
    const MetricsSnapshot s = m.snapshot();
    QCOMPARE(s.prompt_tokens_per_s_1s, 100.0);
    QCOMPARE(s.generation_tokens_per_s_1s, 20.0);
    QCOMPARE(s.prompt_tokens_per_s_10s, 40.0);
    QCOMPARE(s.generation_tokens_per_s_10s, 7.0);
    QCOMPARE(s.slot_utilization_10s, 0.75);  // (2 + 4) / (2 steps * 4 slots)
    QCOMPARE(s.slot_utilization, 10.0 / 12.0);
  }

  void series_are_read_incrementally_with_cursors() {
    MetricsRegistry m(options());
    MetricsUpdate u;
    u.time = Clock::now();
    u.first_tokens = {{1, 0.1, 0.0, 5}, {2, 0.2, 0.0, 5}};
    u.finished = {finished(1, FinishReason::kStop, 5, 3, 0.1, 0.3)};
    u.finished[0].client_id = "cmpl-1";
    m.record(u);
    MetricsSnapshot s = m.snapshot();
    QCOMPARE(s.ttft_points.size(), size_t{2});
    QCOMPARE(s.ttft_points[1].id, RequestId{2});
    QCOMPARE(s.ttft_points[1].ttft_s, 0.2);
    QCOMPARE(s.finished.size(), size_t{1});
    QCOMPARE(s.finished[0].client_id, std::string("cmpl-1"));
    u.first_tokens = {{3, 0.3, 0.0, 5}};
    u.finished.clear();
    m.record(u);
    const MetricsSnapshot next = m.snapshot(s.ttft_cursor, s.finished_cursor);
    QCOMPARE(next.ttft_points.size(), size_t{1});
    QCOMPARE(next.ttft_points[0].id, RequestId{3});
    QVERIFY(next.finished.empty());
    QCOMPARE(next.finished_cursor, s.finished_cursor);
    // reset() clears counters and series; cursors stay valid (no point is repeated).
    m.reset();
    QCOMPARE(m.snapshot().ttft_s.count, uint64_t{0});
    QVERIFY(m.snapshot(next.ttft_cursor).ttft_points.empty());
  }

  void snapshots_are_consistent_while_the_engine_writes() {
    MetricsRegistry m(options());
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      int i = 0;
      while (!stop.load()) {
        MetricsUpdate u;
        u.time = Clock::now();
        u.is_step = true;
        u.num_scheduled_seqs = 1;
        u.num_generated_tokens = 1;
        const int used = i % 60, cached = (i * 7) % 40;
        u.load = load(i % 4, 0, used, cached);
        m.record(u);
        ++i;
      }
    });
    int checked = 0;
    for (int k = 0; k < 2000; ++k) {
      const MetricsSnapshot s = m.snapshot();
      QCOMPARE(s.kv_blocks_used + s.kv_blocks_cached + s.kv_blocks_free, s.kv_blocks_total);
      QCOMPARE(s.generation_tokens, s.num_steps);
      QCOMPARE(s.slot_steps_busy, s.num_steps);
      ++checked;
    }
    stop = true;
    writer.join();
    QCOMPARE(checked, 2000);
  }

  void snapshot_polling_is_cheap() {
    MetricsRegistry m(options());
    MetricsUpdate u;
    u.time = Clock::now();
    for (int i = 0; i < 4096; ++i) u.first_tokens.push_back({RequestId(i), 0.1, 0.0, 5});
    m.record(u);
    QElapsedTimer t;
    t.start();
    uint64_t cursor = 0;
    for (int i = 0; i < 100; ++i) cursor = m.snapshot(cursor).ttft_cursor;  // 10 s of GUI polling
    QVERIFY2(t.elapsed() < 200, qPrintable(QString("%1 ms for 100 snapshots").arg(t.elapsed())));
  }

  void prometheus_text_is_well_formed_and_complete() {
    MetricsRegistry m(options());
    MetricsUpdate u;
    u.time = Clock::now();
    u.is_step = true;
    u.num_scheduled_seqs = 3;
    u.num_batched_tokens = 40;
    u.num_prefill_tokens = 37;
    u.num_generated_tokens = 3;
    u.num_preemptions = 2;
    u.prefix_cache_queries = 64;
    u.prefix_cache_hits = 32;
    u.num_spec_drafts = 2;
    u.num_draft_tokens = 8;
    u.num_accepted_tokens = 5;
    u.itl_s = {0.004, 0.5};
    u.first_tokens.push_back({1, 0.03, 0.01, 37});
    u.finished.push_back(finished(1, FinishReason::kLength, 37, 3, 0.03, 0.9));
    u.load = load(2, 5, 30, 10);
    m.record(u);
    const std::string text = m.prometheus_text();
    const test::PromParse p = test::validate_prometheus_text(text);
    QVERIFY2(p.error.empty(), p.error.c_str());

    const std::map<std::string, std::string> model{{"model_name", "tiny \"test\" model"}};
    QCOMPARE(p.value("lathe:num_requests_running", model), 2.0);
    QCOMPARE(p.value("lathe:num_requests_waiting"), 5.0);
    QCOMPARE(p.value("lathe:kv_cache_usage_perc"), 0.3);
    QCOMPARE(p.value("lathe:kv_cache_blocks", {{"state", "cached"}}), 10.0);
    QCOMPARE(p.value("lathe:prefix_cache_queries_total"), 64.0);
    QCOMPARE(p.value("lathe:prefix_cache_hits_total"), 32.0);
    QCOMPARE(p.value("lathe:num_preemptions_total"), 2.0);
    QCOMPARE(p.value("lathe:spec_decode_num_drafts_total"), 2.0);
    QCOMPARE(p.value("lathe:spec_decode_num_draft_tokens_total"), 8.0);
    QCOMPARE(p.value("lathe:spec_decode_num_accepted_tokens_total"), 5.0);
    QCOMPARE(m.snapshot().spec_decode_acceptance_rate, 5.0 / 8.0);
    QCOMPARE(p.value("lathe:prompt_tokens_total"), 37.0);
    QCOMPARE(p.value("lathe:generation_tokens_total"), 3.0);
    QCOMPARE(p.value("lathe:request_success_total", {{"finished_reason", "length"}}), 1.0);
    QCOMPARE(p.value("lathe:time_to_first_token_seconds_count"), 1.0);
    QCOMPARE(p.value("lathe:time_to_first_token_seconds_bucket", {{"le", "0.04"}}), 1.0);
    QCOMPARE(p.value("lathe:time_to_first_token_seconds_bucket", {{"le", "0.02"}}), 0.0);
    QCOMPARE(p.value("lathe:inter_token_latency_seconds_bucket", {{"le", "0.005"}}), 1.0);
    QCOMPARE(p.value("lathe:inter_token_latency_seconds_bucket", {{"le", "+Inf"}}), 2.0);
    QCOMPARE(p.value("lathe:e2e_request_latency_seconds_sum"), 0.9);
    QCOMPARE(p.value("lathe:iteration_tokens_total_bucket", {{"le", "64"}}), 1.0);
    for (const char* family : {"lathe:num_requests_running", "lathe:num_requests_waiting",
                               "lathe:kv_cache_usage_perc", "lathe:prefix_cache_queries_total",
                               "lathe:prefix_cache_hits_total", "lathe:num_preemptions_total",
                               "lathe:prompt_tokens_total", "lathe:generation_tokens_total"})
      QVERIFY2(p.types.count(family), family);
    for (const char* h :
         {"lathe:time_to_first_token_seconds", "lathe:inter_token_latency_seconds",
          "lathe:request_time_per_output_token_seconds", "lathe:e2e_request_latency_seconds",
          "lathe:request_queue_time_seconds", "lathe:request_prompt_tokens",
          "lathe:request_generation_tokens", "lathe:iteration_tokens_total"})
      QCOMPARE(p.types.at(h), std::string("histogram"));
    QCOMPARE(p.types.at("lathe:prefix_cache_hits_total"), std::string("counter"));
    QCOMPARE(p.types.at("lathe:spec_decode_num_accepted_tokens_total"), std::string("counter"));
    m.reset();
    QCOMPARE(m.snapshot().spec_decode_num_draft_tokens, int64_t{0});
    QCOMPARE(m.snapshot().spec_decode_acceptance_rate, 0.0);
  }

  void the_format_validator_rejects_broken_text() {
    const char* good = "# HELP a_total x\n# TYPE a_total counter\na_total{m=\"1\"} 3\n";
    QVERIFY(test::validate_prometheus_text(good).error.empty());
    const char* broken[] = {
        "a_total 3\n",                                      // no TYPE
        "# TYPE a counter\na -1\n",                         // negative counter
        "# TYPE a gauge\na{m=\"1} 3\n",                     // unterminated value
        "# TYPE a gauge\na{m=1} 3\n",                       // unquoted value
        "# TYPE a gauge\na{m=\"\\x\"} 3\n",                 // bad escape
        "# TYPE a gauge\na three\n",                        // not a number
        "# TYPE a gauge\n# TYPE a gauge\na 1\n",            // TYPE twice
        "# TYPE 1a gauge\n",                                // bad name
        "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n",  // not grouped
        "# TYPE a gauge\na 1",                              // no final newline
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 1\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 1\n",     // no +Inf
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\nh_sum 1\n",  // count mismatch
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",           // no _sum
    };
    for (const char* b : broken) QVERIFY2(!test::validate_prometheus_text(b).error.empty(), b);
  }
};

QTEST_GUILESS_MAIN(MetricsTest)
#include "metrics_test.moc"
