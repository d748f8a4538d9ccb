#include "ui/bridge/model_summary.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QThread>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "engine/core/strings.h"
#include "engine/model/memory_estimate.h"
#include "engine/runtime/cuda_plugin.h"
#include "engine/runtime/engine_setup.h"
#include "engine/runtime/runner_factory.h"

namespace lathe::ui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

// GPU memory that is neither weights nor KV cache: CUDA context, activations, cuBLAS workspaces
// and CUDA graphs. A planning allowance, not a measurement.
constexpr int64_t kGpuOverheadBytes = int64_t{1} << 30;

QString cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return q(line.substr(colon + 1)).trimmed();
    }
  }
  return QStringLiteral("CPU");
}

}  // namespace

ModelSummary summarizeReport(const ModelReport& r) {
  const ModelConfig& c = r.config;
  ModelSummary s;
  s.path = q(r.path);
  s.name = c.name.empty() ? QFileInfo(s.path).fileName() : q(c.name);
  s.architecture = QString::fromLatin1(architecture_name(c.arch));
  s.format = r.format == "gguf" ? QStringLiteral("GGUF")
             : r.format == "hf" ? QStringLiteral("Hugging Face folder (safetensors)")
                                : QStringLiteral("config.json only (no weights)");
  // The card names the storage of the MLP matrices (most of the bytes), else of attention, else
  // the dominant dtype.
  QString dtype = QString::fromLatin1(dtype_name(c.weight_dtype));
  for (const char* wanted : {"attention", "mlp"})
    for (const auto& [group, type] : r.dtypes)
      if (group == wanted) dtype = q(type);
  s.dtype = dtype;
  s.numParameters = r.memory.num_parameters;
  s.numLayers = c.num_layers;
  s.numHeads = c.num_heads;
  s.numKvHeads = c.num_kv_heads;
  s.headDim = c.head_dim;
  s.hiddenSize = c.hidden_size;
  s.intermediateSize = c.intermediate_size;
  s.vocabSize = c.vocab_size;
  s.contextLength = c.max_position_embeddings;
  s.fileBytes = r.file_bytes;
  for (const auto& [group, type] : r.dtypes) s.dtypeSummary.push_back({q(group), q(type)});
  s.hasChatTemplate = r.has_chat_template;
  return s;
}

ModelFacts factsFromReport(const ModelReport& r) {
  ModelFacts f;
  f.config = r.config;
  f.storedWeightBytes = r.memory.weight_bytes_stored;
  return f;
}

MemoryPlan planMemoryFor(const ModelFacts& facts, const LoadSettings& settings,
                         const DeviceInfo& device, qint64 loadedWeightBytes) {
  MemoryPlan p;
  const bool gpu = settings.device == QLatin1String("cuda") ||
                   (settings.device == QLatin1String("auto") && device.isGpu);
  const bool gpuUsable = gpu && device.isGpu;
  p.maxModelLen = settings.maxModelLen > 0 ? settings.maxModelLen
                                           : static_cast<int>(facts.config.max_position_embeddings);
  p.numSeqs = settings.maxNumSeqs > 0
                  ? settings.maxNumSeqs
                  : device_defaults(gpu ? DeviceKind::kCuda : DeviceKind::kCpu).max_num_seqs;
  const MemoryEstimate e =
      estimate_memory(facts.config, facts.storedWeightBytes, p.maxModelLen, p.numSeqs);
  p.weightsFp16Bytes = e.weight_bytes_fp16;
  p.weightsInt8Bytes = e.weight_bytes_int8;
  p.weightsInt4Bytes = e.weight_bytes_int4;
  p.deviceIsGpu = gpuUsable;
  FitRequest fr;
  fr.max_model_len = p.maxModelLen;
  fr.num_sequences = p.numSeqs;
  fr.int4_weight_bytes = e.weight_bytes_int4;
  if (gpu) {
    // The CUDA backend keeps quantized weights in their formats (GPTQ/AWQ/compressed-tensors/FP8
    // repacked at about their stored size, GGUF blocks of every supported type as stored) and
    // 32-bit ones in 16 bits.
    p.weightsAsLoadedBytes = facts.storedWeightBytes > 0
                                 ? std::min<int64_t>(facts.storedWeightBytes, e.weight_bytes_fp16)
                                 : e.weight_bytes_fp16;
    p.kvBytesPerToken = e.kv_bytes_per_token_fp16;
    p.kvBytesForPlan = e.kv_bytes_fp16;
    p.budgetBytes = gpuUsable ? static_cast<int64_t>(static_cast<double>(device.totalBytes) *
                                                     settings.gpuMemoryUtilization)
                              : 0;
    p.deviceName = gpuUsable ? device.name : QObject::tr("no CUDA GPU detected");
    fr.overhead_bytes = kGpuOverheadBytes;
  } else {
    // The CPU backend reads weights in place and keeps an fp32 KV cache (as `lathe inspect`).
    p.weightsAsLoadedBytes =
        facts.storedWeightBytes > 0 ? facts.storedWeightBytes : e.weight_bytes_fp16;
    p.kvBytesPerToken = e.kv_bytes_per_token_fp32;
    p.kvBytesForPlan = e.kv_bytes_fp32;
    p.budgetBytes = system_memory_bytes();
    p.deviceName = device.isGpu ? cpuName() : device.name;
  }
  if (loadedWeightBytes > 0) p.weightsAsLoadedBytes = loadedWeightBytes;
  fr.budget_bytes = p.budgetBytes;
  fr.weight_bytes = p.weightsAsLoadedBytes;
  fr.kv_bytes_per_token = p.kvBytesPerToken;
  const FitVerdict v = check_fit(fr);
  // What the engine will give the KV cache: on a GPU all that is left of the budget; on the CPU
  // its default budget (capped by what is left of RAM).
  p.kvAllocTokens = gpu ? (gpuUsable ? v.max_kv_tokens : 0)
                        : std::min<int64_t>(default_cpu_kv_cache_bytes() /
                                                std::max<int64_t>(1, p.kvBytesPerToken),
                                            v.max_kv_tokens);
  p.kvAllocBytes = p.kvAllocTokens * p.kvBytesPerToken;
  p.seqsThatFit = static_cast<int>(std::min<int64_t>(v.max_sequences, INT32_MAX));
  switch (v.kind) {
    case FitKind::kFits:
      p.verdict = MemoryPlan::Verdict::kFits;
      break;
    case FitKind::kFitsFewerSequences:
      p.verdict = MemoryPlan::Verdict::kFitsFewerSeqs;
      break;
    case FitKind::kDoesNotFit:
      p.verdict = MemoryPlan::Verdict::kDoesNotFit;
      break;
  }
  // The engine's message is one line: "fits: …", "fits 3 of 8 sequences …; for all 8 use …",
  // "does not fit: …; use …". Split the advice (after "; ") from the verdict.
  const QString message = q(v.message);
  const qsizetype semi = message.indexOf(QStringLiteral("; "));
  p.verdictText = semi < 0 ? message : message.left(semi);
  p.advice = semi < 0 ? QString() : message.mid(semi + 2);
  if (!p.verdictText.isEmpty()) p.verdictText[0] = p.verdictText[0].toUpper();
  if (!p.advice.isEmpty()) p.advice[0] = p.advice[0].toUpper();
  if (gpu && !gpuUsable) {
    p.verdict = MemoryPlan::Verdict::kDoesNotFit;
    p.verdictText = QObject::tr("No usable CUDA GPU was found");
    p.advice = QObject::tr("Choose the CPU device (or Auto) in the load settings.");
  }
  return p;
}

DeviceInfo detectDevice() {
  DeviceInfo d;
  // The CUDA backend (a plugin, loaded on first use) decides which GPUs are usable (driver, compute
  // capability) and gives the name and memory of device 0, the one the engine uses by default.
  const Result<CudaDeviceProperties> gpu = cuda_backend::properties(0);
  if (gpu.is_ok()) {
    d.isGpu = true;
    d.name = QString::fromStdString(gpu->name);
    d.totalBytes = static_cast<qint64>(gpu->total_bytes);
    return d;
  }
  d.isGpu = false;
  d.name = cpuName();
  d.totalBytes = system_memory_bytes();
  return d;
}

EngineConfig toEngineConfig(const QString& path, const LoadSettings& s, int cpuThreads) {
  EngineConfig c;
  c.model_path = path.toStdString();
  // A folder with config.json and no weights loads with random weights of the model's shape
  // (vLLM's --load-format dummy): the card calls it "config.json only".
  const QDir dir(path);
  if (QFileInfo(path).isDir() && dir.exists(QStringLiteral("config.json")) &&
      dir.entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty())
    c.load.load_format = LoadFormat::kDummy;
  parse_device_kind(s.device.toStdString(), &c.device.device);
  c.device.dtype = s.dtype.toStdString();
  // Leave a core to the GUI thread so the window stays responsive while the CPU backend computes.
  c.device.num_threads = cpuThreads > 0 ? cpuThreads : std::max(1, QThread::idealThreadCount() - 1);
  c.cache.gpu_memory_utilization = s.gpuMemoryUtilization;
  c.cache.enable_prefix_caching = s.enablePrefixCaching;
  c.scheduler.max_model_len = s.maxModelLen;
  c.scheduler.max_num_seqs = s.maxNumSeqs;
  c.scheduler.max_num_batched_tokens = s.maxNumBatchedTokens;
  c.scheduler.policy = s.scheduling == QLatin1String("static") ? SchedulingPolicy::kStatic
                                                               : SchedulingPolicy::kContinuous;
  return c;
}

MetricsSample toMetricsSample(const MetricsSnapshot& m) {
  MetricsSample s;
  s.timeSec = m.time_s;
  s.kvTotalBlocks = m.kv_blocks_total;
  s.kvUsedBlocks = m.kv_blocks_used;
  s.kvCachedBlocks = m.kv_blocks_cached;
  s.kvFreeBlocks = m.kv_blocks_free;
  s.kvUsagePercent = 100.0 * m.kv_cache_usage;
  s.blockSize = m.kv_block_size;
  s.numRunning = m.num_requests_running;
  s.numWaiting = m.num_requests_waiting;
  s.maxNumSeqs = m.max_num_seqs;
  s.promptTokensPerSec = m.prompt_tokens_per_s_1s;
  s.generationTokensPerSec = m.generation_tokens_per_s_1s;
  s.promptTokens = m.prompt_tokens;
  s.generationTokens = m.generation_tokens;
  s.prefixCacheQueries = m.prefix_cache_queries;
  s.prefixCacheHits = m.prefix_cache_hits;
  s.numPreemptions = m.num_preemptions;
  s.requestsFinished = m.requests_finished_stop + m.requests_finished_length +
                       m.requests_finished_abort + m.requests_finished_error;
  s.itlSumSec = m.itl_s.sum;
  s.itlCount = static_cast<qint64>(m.itl_s.count);
  s.newTtft.reserve(static_cast<qsizetype>(m.ttft_points.size()));
  for (const TtftPoint& p : m.ttft_points) s.newTtft.push_back({p.time_s, 1000.0 * p.ttft_s});
  return s;
}

GenerationStats statsFromEvent(const StreamEvent& ev) {
  GenerationStats s;
  s.promptTokens = ev.usage.prompt_tokens;
  s.completionTokens = ev.usage.completion_tokens;
  s.cachedPromptTokens = ev.usage.cached_prompt_tokens;
  s.finishReason = QString::fromLatin1(finish_reason_name(ev.finish_reason));
  s.error = q(ev.error);
  if (ev.timeline != nullptr) {
    using Ms = std::chrono::duration<double, std::milli>;
    const RequestTimeline& t = *ev.timeline;
    const Clock::time_point none{};
    if (t.first_token != none && t.arrival != none)
      s.ttftMs = Ms(t.first_token - t.arrival).count();
    if (t.finished != none && t.arrival != none) s.totalMs = Ms(t.finished - t.arrival).count();
    // Decode rate, as the server's log: tokens after the first over the time since the first.
    if (t.first_token != none && t.finished != none && s.completionTokens > 1) {
      const double sec = Ms(t.finished - t.first_token).count() / 1000.0;
      if (sec > 0) s.tokensPerSecond = (s.completionTokens - 1) / sec;
    }
  }
  return s;
}

lathe::ui::RequestLogEntry toLogEntry(const lathe::RequestLogEntry& e) {
  lathe::ui::RequestLogEntry out;
  out.timeMsecsSinceEpoch =
      std::chrono::duration_cast<std::chrono::milliseconds>(e.time.time_since_epoch()).count();
  out.id = q(e.id);
  out.endpoint = q(e.endpoint);
  out.promptTokens = e.prompt_tokens;
  out.cachedPromptTokens = e.cached_prompt_tokens;
  out.completionTokens = e.completion_tokens;
  out.ttftMs = e.ttft_ms;
  out.tokensPerSecond = e.tokens_per_s < 0 ? 0.0 : e.tokens_per_s;
  out.finishReason = e.finish_reason.empty()
                         ? (e.error.empty() ? QStringLiteral("—") : QStringLiteral("rejected"))
                         : q(e.finish_reason);
  out.httpStatus = e.http_status;
  return out;
}

}  // namespace lathe::ui
