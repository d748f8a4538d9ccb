#include "ui/bridge/quantize_plan.h"

#include <QDir>
#include <QFileInfo>
#include <QObject>
#include <QThread>
#include <QUuid>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "engine/quant/calibration.h"
#include "engine/quant/gguf_quant_writer.h"
#include "engine/quant/hf_quant_writer.h"
#include "engine/quant/quantize_model.h"
#include "ui/bridge/model_summary.h"

namespace lathe::ui {

namespace {

// Nominal memory bandwidth of common GPUs (bytes/s, vendor datasheets), matched on the name.
struct NominalBandwidth {
  const char* name;
  double bytesPerSecond;
};
constexpr NominalBandwidth kGpuBandwidth[] = {
    {"H200", 4.8e12},       {"H100 NVL", 3.9e12},   {"H100 PCIe", 2.0e12}, {"H100", 3.35e12},
    {"B200", 8.0e12},       {"A100", 2.0e12},       {"L40S", 0.864e12},    {"L4", 0.3e12},
    {"RTX 4090", 1.008e12}, {"RTX 3090", 0.936e12}, {"A10", 0.6e12},       {"T4", 0.32e12},
};

// Read bandwidth of this host: all threads but one sum disjoint parts of a 256 MiB buffer (the
// CPU backend's thread count); the best of three passes.
double measureHostReadBandwidth() {
  constexpr size_t kBytes = size_t{256} << 20;
  std::vector<uint64_t> buffer(kBytes / sizeof(uint64_t));
  std::iota(buffer.begin(), buffer.end(), uint64_t{1});  // touches every page
  const int threads = std::max(1, QThread::idealThreadCount() - 1);
  double best = 0.0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads), 0);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    const size_t per = buffer.size() / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        const uint64_t* p = buffer.data() + per * static_cast<size_t>(t);
        uint64_t s = 0;
        for (size_t i = 0; i < per; ++i) s += p[i];
        sums[static_cast<size_t>(t)] = s;
      });
    for (std::thread& w : workers) w.join();
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (std::accumulate(sums.begin(), sums.end(), uint64_t{0}) == 0) continue;  // keeps the sums
    best = std::max(best, static_cast<double>(per * static_cast<size_t>(threads) * 8) / sec);
  }
  return best;
}

QuantCandidate makeCandidate(const QString& scheme, int bits, const QString& label) {
  QuantCandidate c;
  c.scheme = scheme;
  c.bits = bits;
  c.label = label;
  c.isGguf = scheme.startsWith(QLatin1Char('q'));
  c.outputKind = c.isGguf ? QObject::tr("GGUF file") : QObject::tr("Hugging Face folder");
  return c;
}

QuantSchemeRequest toSchemeRequest(const QuantizeSpec& spec) {
  QuantSchemeRequest r;
  r.scheme = spec.scheme.toStdString();
  r.bits = spec.bits;
  r.group_size = spec.groupSize;
  r.format = spec.format.toStdString();
  return r;
}

}  // namespace

BandwidthEstimate estimateBandwidth(const DeviceInfo& device) {
  BandwidthEstimate b;
  if (device.isGpu) {
    b.deviceLabel = device.name;
    for (const NominalBandwidth& n : kGpuBandwidth)
      if (device.name.contains(QLatin1String(n.name))) {
        b.bytesPerSecond = n.bytesPerSecond;
        b.how = QObject::tr("nominal %1 GB/s (datasheet)").arg(n.bytesPerSecond / 1e9, 0, 'f', 0);
        return b;
      }
    b.how = QObject::tr("bandwidth of this GPU unknown: no speed estimate");
    return b;
  }
  static const double measured = measureHostReadBandwidth();
  b.deviceLabel = QObject::tr("CPU");
  b.bytesPerSecond = measured;
  b.how =
      QObject::tr("measured %1 GB/s read bandwidth of this machine").arg(measured / 1e9, 0, 'f', 1);
  return b;
}

QuantCandidates planQuantCandidates(const QString& path, const LoadSettings& settings,
                                    const DeviceInfo& device, const BandwidthEstimate& bandwidth) {
  QuantCandidates out;
  out.modelPath = path;
  out.bandwidth = bandwidth;
  auto report = inspect_model(path.toStdString(), ReportOptions{});
  if (!report.is_ok()) {
    out.error = QString::fromStdString(report.status().message());
    return out;
  }
  out.model = summarizeReport(report.value());
  out.model.path = path;
  auto source = QuantSource::open(path.toStdString());
  if (!source.is_ok()) {
    out.error = QString::fromStdString(source.status().message());
    return out;
  }
  const ModelFacts facts = factsFromReport(report.value());
  const double params = static_cast<double>(std::max<int64_t>(1, facts.config.num_parameters()));

  QVector<QuantCandidate> list = {
      makeCandidate(QStringLiteral("q8_0"), -1, QStringLiteral("GGUF Q8_0")),
      makeCandidate(QStringLiteral("q6_k"), -1, QStringLiteral("GGUF Q6_K")),
      makeCandidate(QStringLiteral("q5_k_m"), -1, QStringLiteral("GGUF Q5_K_M")),
      makeCandidate(QStringLiteral("q4_k_m"), -1, QStringLiteral("GGUF Q4_K_M")),
      makeCandidate(QStringLiteral("q4_0"), -1, QStringLiteral("GGUF Q4_0")),
      makeCandidate(QStringLiteral("fp8-dynamic"), -1, QStringLiteral("FP8 (per channel)")),
      makeCandidate(QStringLiteral("fp8-block"), -1, QStringLiteral("FP8 (128×128 blocks)")),
      makeCandidate(QStringLiteral("int8-w8a16"), -1, QStringLiteral("INT8 W8A16")),
      makeCandidate(QStringLiteral("rtn"), 8, QStringLiteral("INT8 RTN g128")),
      makeCandidate(QStringLiteral("rtn"), 4, QStringLiteral("INT4 RTN g128")),
      makeCandidate(QStringLiteral("gptq"), 4, QStringLiteral("GPTQ INT4 (calibrated)")),
      makeCandidate(QStringLiteral("awq"), 4, QStringLiteral("AWQ INT4 (calibrated)")),
  };
  for (QuantCandidate& c : list) {
    c.needsCalibration = c.scheme == QLatin1String("gptq") || c.scheme == QLatin1String("awq");
    if (c.needsCalibration) {
      // The built-in calibration set must be there (the wizard's Step 2 may pick a file instead).
      const Status calibration = check_calibration_config(CalibrationConfig{});
      if (!calibration.is_ok()) {
        c.enabled = false;
        c.disabledReason = QString::fromStdString(calibration.message());
        continue;
      }
    }
    // Integer schemes take the largest usual group size that divides every layer's inputs.
    const bool grouped = c.bits > 0;
    Result<QuantScheme> scheme = invalid_argument("no scheme");
    Result<std::unique_ptr<QuantOutputWriter>> writer = invalid_argument("no writer");
    for (const qint64 group : grouped ? QVector<qint64>{128, 64, 32} : QVector<qint64>{0}) {
      QuantizeSpec spec;
      spec.scheme = c.scheme;
      spec.bits = c.bits;
      spec.groupSize = group;
      scheme = resolve_quant_scheme(toSchemeRequest(spec), hf_output_dtype(source.value()));
      if (!scheme.is_ok()) break;
      writer = scheme->kind == QuantKind::kGguf
                   ? make_gguf_quant_writer(source.value(), scheme.value())
                   : make_hf_quant_writer(source.value(), scheme.value(), int64_t{5} << 30);
      if (writer.is_ok()) {
        c.groupSize = group;
        if (grouped)
          c.label = QStringLiteral("%1 INT%2 g%3%4")
                        .arg(c.scheme.toUpper())
                        .arg(c.bits)
                        .arg(group)
                        .arg(c.needsCalibration ? QObject::tr(" (calibrated)") : QString());
        break;
      }
    }
    if (!scheme.is_ok()) writer = scheme.status();
    if (!writer.is_ok()) {
      c.enabled = false;
      c.disabledReason = QString::fromStdString(writer.status().message());
      continue;
    }
    c.description = QString::fromStdString(scheme->description());
    c.expectedBytes = writer.value()->expected_bytes();
    c.bitsPerWeight = static_cast<double>(c.expectedBytes) * 8.0 / params;
    c.plan = planMemoryFor(facts, settings, device, c.expectedBytes);
    // Batch-1 decode reads every weight once per token: the roofline's ceiling.
    if (bandwidth.bytesPerSecond > 0 && c.expectedBytes > 0)
      c.tokensPerSecond = bandwidth.bytesPerSecond / static_cast<double>(c.expectedBytes);
  }
  out.candidates = list;
  return out;
}

qint64 plannedOutputBytes(const QuantizeSpec& spec, QString* error) {
  QuantizeRequest r;
  r.model = spec.model.toStdString();
  r.output =
      QDir::temp()
          .filePath(QStringLiteral("lathe-plan-%1").arg(QUuid::createUuid().toString(QUuid::Id128)))
          .toStdString();
  r.scheme = toSchemeRequest(spec);
  auto job = QuantizeJob::prepare(r);
  if (!job.is_ok()) {
    if (error) *error = QString::fromStdString(job.status().message());
    return -1;
  }
  return job.value()->expected_bytes();
}

}  // namespace lathe::ui
