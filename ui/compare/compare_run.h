// A comparison as Lathe keeps it: what was asked (the spec), what was measured (every variant),
// the verdict that was shown, and when it finished. Its JSON file is both the Compare tab's JSON
// export and the saved run (compare_run_store.h); compareFromJson reads it back so the table, the
// chart and the verdict show exactly what they showed, without measuring again.
//
// The file (UTF-8 JSON, one object):
//   {"format": "lathe-compare", "version": 1, "finished": "2025-05-01T12:00:00.000Z",
//    "spec": {"models": [paths], "concurrency": [levels], "input_len", "output_len",
//             "prompts_per_level", "latency_iters", "max_model_len", "cpu_threads", "eval_text",
//             "eval_context", "eval_windows"},
//    "variants": [{"name", "path", "device", "storage", "weight_bytes", "bits_per_weight",
//                  "kv_cache_bytes", "batch1_tokens_per_s", "batch1_latency_ms",
//                  "prefill_tokens_per_s", "ttft_ms", "error",
//                  "quality": {"measured", "text", "error", "scored_positions", "windows",
//                              "context", "perplexity", "reference_perplexity", "kld_mean",
//                              "kld_p99", "top1_agreement", "seconds"},
//                  "sweep": [{"concurrency", "completed", "failed", "output_tokens_per_s",
//                             "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
//                             "itl_p99_ms"}]}],
//    "verdict": "…"}
// Units: bytes, tokens, milliseconds, tokens or requests per second; top1_agreement in 0..1. Every
// field is written; a number that is not finite is written as null and read back as NaN.
#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QString>
#include <QVector>

#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

struct CompareRun {
  CompareSpec spec;
  QVector<CompareVariant> variants;  // in spec.models order; the first is the reference
  QString verdict;                   // the paragraph shown under the chart
  QDateTime finished;                // UTC, millisecond precision

  bool operator==(const CompareRun& other) const = default;
};

inline constexpr int kCompareRunVersion = 1;  // the newest version this build writes and reads

QByteArray compareToJson(const CompareRun& run);

// Reads what compareToJson wrote. False with *error saying what is wrong and where, in words a
// user can act on: not JSON (with the byte offset), not a Lathe comparison, a version this build
// does not read, or the first missing or mistyped field by its path ("variants[1].sweep[0]:
// \"ttft_p50_ms\" is missing"). *out is only written on success.
bool compareFromJson(const QByteArray& bytes, CompareRun* out, QString* error);

// The devices the variants were measured on, each once, in order of first use.
QStringList compareDevices(const QVector<CompareVariant>& variants);

}  // namespace lathe::ui
