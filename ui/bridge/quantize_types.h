// Plain Qt-side data of the quantization wizard and the Compare tab: the candidate schemes with
// their planned cost, a quantization job's request, progress and outcome, and a comparison's
// request and results. Widgets use these and never the engine's quant/bench headers.
#pragma once

#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>

#include "ui/bridge/bridge_types.h"

namespace lathe::ui {

// Where a candidate's expected quality comes from. Measured reports (`lathe eval`) replace the
// literature figures once they exist for a model.
enum class QualitySource { kNone, kLiterature, kMeasured };

// One scheme the wizard offers for a model, planned by the quantization library itself.
struct QuantCandidate {
  QString scheme;        // `lathe quantize --scheme` value: "q8_0", "rtn", "fp8-dynamic", …
  int bits = -1;         // rtn: 4 or 8; -1 otherwise
  qint64 groupSize = 0;  // rtn: the largest of 128, 64, 32 that divides every layer
  QString label;         // "GGUF Q8_0", "INT4 RTN g128", …
  QString description;   // the library's one-line description of the scheme
  QString outputKind;    // "GGUF file" or "Hugging Face folder"
  bool isGguf = false;
  bool needsCalibration = false;  // gptq, awq: Step 2 of the wizard
  // Disabled candidates stay in the table with the reason (calibration not available yet, or a
  // check of the library failed for this model).
  bool enabled = true;
  QString disabledReason;
  qint64 expectedBytes = 0;    // the library's planned output size (QuantizeJob::expected_bytes)
  double bitsPerWeight = 0.0;  // expectedBytes × 8 / parameters
  MemoryPlan plan;             // the memory plan with these weights under the current settings
  // Roofline upper bound of batch-1 decode: bandwidth / bytes read per token (the weights). The
  // recommendation ranks by it (the same estimate for every candidate).
  double tokensPerSecond = 0.0;
  // What the Compare tab measured of an earlier output of this scheme on this device (0: none),
  // shown instead of the estimate, and where and when.
  double measuredTokensPerSecond = 0.0;
  QString speedSource;
  QString quality;  // "+0.0026 PPL (Llama-3-8B)"
  QualitySource qualitySource = QualitySource::kNone;
  QString qualityCitation;  // where a literature figure comes from
  int qualityRank = 0;      // larger = closer to the original (orders "best quality")
};

// The device's memory bandwidth as the roofline uses it.
struct BandwidthEstimate {
  double bytesPerSecond = 0.0;
  QString deviceLabel;  // "CPU" or the GPU's name
  QString how;          // "measured: 12.3 GB/s single-thread read", "nominal (datasheet)"
};

struct QuantCandidates {
  QString modelPath;
  ModelSummary model;
  BandwidthEstimate bandwidth;
  QVector<QuantCandidate> candidates;
  QString error;  // set when the model cannot be quantized at all (unreadable, unsupported)
};

// What the wizard asks the library to do (quantize_model.h's QuantizeRequest).
struct QuantizeSpec {
  QString model;
  QString output;        // folder (HF formats) or .gguf file
  QString scheme;        // as QuantCandidate::scheme
  int bits = -1;         // rtn
  qint64 groupSize = 0;  // rtn: 0 default (128), -1 per channel
  QString format;        // rtn: gptq | awq | compressed-tensors
  // gptq, awq: the calibration set (empty file: the built-in set), samples × tokens.
  QString calibrationFile;
  int calibrationSamples = 128;
  int calibrationSeqLen = 512;
  // After a finished job: lathe eval of the output against the model on a held-out text
  // (evalText empty: no measurement). Windows of evalContext tokens, at most evalWindows.
  QString evalText;
  int evalContext = 512;
  int evalWindows = 8;
};

// What lathe eval measured for a quantized model against its source (engine/eval/evaluate.h).
struct QualityReport {
  bool measured = false;
  QString text;   // the held-out text file
  QString error;  // why it was not measured
  qint64 scoredPositions = 0;
  int windows = 0;
  int context = 0;
  double perplexity = 0.0;
  double referencePerplexity = 0.0;
  double kldMean = 0.0;
  double kldP99 = 0.0;
  double top1Agreement = 0.0;  // 0..1
  double seconds = 0.0;

  bool operator==(const QualityReport& other) const = default;
};

struct QuantizeProgressInfo {
  qint64 tensorsDone = 0;
  qint64 tensorsTotal = 0;
  qint64 layer = -1;  // -1: embedding, norm, head
  qint64 numLayers = 0;
  QString tensor;
  double elapsedSec = 0.0;
  double etaSec = 0.0;
  qint64 residentBytes = 0;  // this process's resident memory
  // gptq, awq: where the arithmetic runs ("cuda:0 NVIDIA H200", "cpu (16 threads)") and the GPU
  // memory it has held at most (0 on the CPU); empty / 0 for the other schemes.
  QString device;
  qint64 peakDeviceBytes = 0;
  bool evaluating = false;  // the output is written; lathe eval measures it (windows as tensors)
  double fraction() const {
    return tensorsTotal > 0 ? static_cast<double>(tensorsDone) / tensorsTotal : 0.0;
  }
};

struct QuantizeOutcome {
  enum class Kind { kFinished, kFailed, kCancelled };
  Kind kind = Kind::kFailed;
  QString output;
  QString message;  // failure or cancellation: what happened and what to do
  qint64 outputBytes = 0;
  qint64 quantizedTensors = 0;
  qint64 keptTensors = 0;
  double seconds = 0.0;
  QStringList notes;
  QualityReport quality;  // kFinished with spec.evalText set
};

// --- Compare tab ------------------------------------------------------------------------------

struct CompareSpec {
  QStringList models;                                   // 2-4 paths; the first is the reference
  QVector<int> concurrency = {1, 4, 16, 64, 128, 300};  // serving sweep levels
  int inputLen = 128;       // prompt tokens (latency, prefill and sweep)
  int outputLen = 64;       // generated tokens per request
  int promptsPerLevel = 0;  // 0: max(level, 2 × level capped at 64) — see CompareTask
  int latencyIters = 3;     // batch-1 latency iterations (after one warm-up)
  int maxModelLen = 1024;   // engine context per sequence
  int cpuThreads = 0;       // 0: all cores but one
  // Quality of every variant against the first on this plain-text file (`lathe eval`, on the CPU):
  // windows of evalContext tokens, at most evalWindows. Empty: no quality columns.
  QString evalText;
  int evalContext = 256;
  int evalWindows = 2;

  bool operator==(const CompareSpec& other) const = default;
};

// One concurrency level of a variant's serving sweep (vLLM benchmark_serving's definitions).
struct ComparePoint {
  int concurrency = 0;
  int completed = 0;
  int failed = 0;
  double outputTokensPerSec = 0.0;
  double requestsPerSec = 0.0;
  double ttftP50Ms = 0.0, ttftP99Ms = 0.0;
  double itlP50Ms = 0.0, itlP99Ms = 0.0;

  bool operator==(const ComparePoint& other) const = default;
};

struct CompareVariant {
  QString path;
  QString name;    // file or folder name
  QString device;  // where it was measured: the engine's device name ("NVIDIA H200 (139.8 GiB)")
  QString dtype;   // the card's storage type ("q4_1", "q8_0", "compressed-tensors int4", …)
  qint64 weightBytes = 0;
  double bitsPerWeight = 0.0;
  qint64 kvCacheBytes = 0;           // what the engine allocated for the KV cache
  double batch1TokensPerSec = 0.0;   // decode, from the mean time per output token at batch 1
  double batch1LatencyMs = 0.0;      // mean end-to-end latency of one request
  double prefillTokensPerSec = 0.0;  // prompt tokens / median TTFT at batch 1
  double ttftMs = 0.0;               // median TTFT at batch 1
  QVector<ComparePoint> sweep;
  QualityReport quality;  // against the first variant (CompareSpec::evalText), not for the first
  QString error;          // set when the variant could not be measured

  bool operator==(const CompareVariant& other) const = default;
};

struct CompareProgressInfo {
  int variant = 0;  // index into CompareSpec::models
  int numVariants = 0;
  QString stage;          // "loading", "batch-1 latency", "concurrency 16", …
  double fraction = 0.0;  // of the whole comparison
};

}  // namespace lathe::ui

Q_DECLARE_METATYPE(lathe::ui::QuantCandidates)
Q_DECLARE_METATYPE(lathe::ui::QuantizeProgressInfo)
Q_DECLARE_METATYPE(lathe::ui::QuantizeOutcome)
Q_DECLARE_METATYPE(lathe::ui::CompareVariant)
Q_DECLARE_METATYPE(lathe::ui::CompareProgressInfo)
