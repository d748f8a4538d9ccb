// Plain Qt-side data that crosses the EngineBridge: what widgets send to the engine and what they
// get back. Widgets include this header and engine_bridge.h, never engine headers. Every type is
// registered as a Qt metatype so it travels through queued signals.
#pragma once

#include <QMetaType>
#include <QPair>
#include <QString>
#include <QVector>

#include <optional>

namespace lathe::ui {

// What a model is, as the model card shows it (from the loader's model report, the same data
// `lathe inspect --json` prints).
struct ModelSummary {
  QString path;          // file or folder the user chose
  QString name;          // general.name or the folder name
  QString architecture;  // "llama", "qwen2", ...
  QString format;        // "GGUF", "Hugging Face folder"
  QString dtype;         // dominant storage type or quantization, e.g. "q4_1", "bf16"
  qint64 numParameters = 0;
  qint64 numLayers = 0;
  qint64 numHeads = 0;
  qint64 numKvHeads = 0;
  qint64 headDim = 0;
  qint64 hiddenSize = 0;
  qint64 intermediateSize = 0;
  qint64 vocabSize = 0;
  qint64 contextLength = 0;                       // trained context (max_position_embeddings)
  qint64 fileBytes = 0;                           // weight files on disk
  QVector<QPair<QString, QString>> dtypeSummary;  // tensor group -> storage type
  bool hasChatTemplate = false;

  bool isValid() const { return !path.isEmpty(); }
};

// The device a model would be loaded on: the detected GPU, else the host's RAM.
struct DeviceInfo {
  bool isGpu = false;
  QString name;           // "NVIDIA H200" or the CPU model
  qint64 totalBytes = 0;  // device memory (GPU) or physical RAM (CPU)
};

// The memory plan for a model under some load settings on the detected device.
struct MemoryPlan {
  enum class Verdict { kFits, kFitsFewerSeqs, kDoesNotFit };
  qint64 weightsFp16Bytes = 0;
  qint64 weightsInt8Bytes = 0;
  qint64 weightsInt4Bytes = 0;
  qint64 weightsAsLoadedBytes = 0;  // what this model takes as it will be loaded
  qint64 kvBytesPerToken = 0;
  int maxModelLen = 0;        // resolved (0 in the settings = the model's context)
  int numSeqs = 0;            // resolved concurrent sequences
  qint64 kvBytesForPlan = 0;  // KV for maxModelLen × numSeqs
  qint64 budgetBytes = 0;     // memory Lathe may use on the device
  qint64 kvAllocBytes = 0;    // KV cache the engine will allocate at load (estimate)
  qint64 kvAllocTokens = 0;   // = kvAllocBytes / kvBytesPerToken
  QString deviceName;
  bool deviceIsGpu = false;
  Verdict verdict = Verdict::kDoesNotFit;
  int seqsThatFit = 0;  // full-length sequences that fit beside the weights
  QString verdictText;  // one line: "Fits: …", "Fits 12 sequences at this length", …
  QString advice;       // what to change when it does not fit; empty when it fits
};

// Serve panel settings.
struct ServeSettings {
  QString host = QStringLiteral("127.0.0.1");
  int port = 8000;  // 0: any free port
  QString apiKey;   // empty: no authentication
};

// A function call the model made (OpenAI's tool_calls entry).
struct ChatToolCall {
  QString id;         // what the tool result answers (tool_call_id)
  QString name;       // the function
  QString arguments;  // JSON text of an object, as the model wrote it
};

// One chat message as the engine's chat template sees it.
struct ChatTurn {
  QString role;  // "system", "user", "assistant", "tool"
  QString content;
  QVector<ChatToolCall> toolCalls;  // assistant: the calls it made
  QString toolCallId;               // tool: the call this result answers
  QString toolName;                 // tool: the function that produced it
};

// What the chat asks for beyond plain text: structured output and tools, checked and compiled by
// the same code as the server's response_format / tools (so the same problems get the same
// messages).
struct ChatOutputSettings {
  bool jsonOutput = false;  // constrain the reply to JSON
  QString jsonSchema;       // the schema it must validate against; blank: any JSON object
  QString tools;            // OpenAI tool definitions (a JSON array); blank: none
  QString toolChoice = QStringLiteral("auto");  // "auto", "required" or "none"

  bool usesTools() const { return !tools.trimmed().isEmpty(); }
  bool isPlain() const { return !jsonOutput && !usesTools(); }
  bool operator==(const ChatOutputSettings&) const = default;
};

// Sampling controls exposed in the chat panel (OpenAI / vLLM semantics).
struct SamplingSettings {
  double temperature = 0.7;  // 0 = greedy
  double topP = 0.95;        // (0, 1]
  int topK = 0;              // 0 = off
  double minP = 0.0;         // 0 = off
  double repetitionPenalty = 1.0;
  int maxTokens = 512;
  std::optional<quint64> seed;  // unset: random per request
};

struct GenerationRequest {
  QVector<ChatTurn> messages;  // rendered through the model's chat template
  SamplingSettings sampling;
  ChatOutputSettings output;
};

// A finished reply of a request with tools, parsed as the server parses it: the text outside the
// calls and the calls.
struct ChatToolReply {
  QString content;
  QVector<ChatToolCall> calls;
};

// What a finished generation reports (kept with each chat reply).
struct GenerationStats {
  int promptTokens = 0;
  int completionTokens = 0;
  int cachedPromptTokens = 0;    // prompt tokens served from the prefix cache
  double ttftMs = -1.0;          // arrival → first token; < 0 when no token came
  double tokensPerSecond = 0.0;  // generated tokens after the first / time since the first token
  double totalMs = 0.0;          // arrival → finish
  QString finishReason;          // "stop", "length", "abort", "error"
  QString error;                 // finishReason == "error" (or a failed submit): what went wrong
};

// One finished API request, as the Serve panel's log shows it.
struct RequestLogEntry {
  qint64 timeMsecsSinceEpoch = 0;  // wall-clock time the request finished
  QString id;                      // the API's request id ("chatcmpl-…")
  QString endpoint;                // "/v1/chat/completions", …
  int promptTokens = 0;
  int cachedPromptTokens = 0;  // of which served from the prefix cache
  int completionTokens = 0;
  double ttftMs = -1.0;
  double tokensPerSecond = 0.0;
  QString finishReason;
  int httpStatus = 200;
};

// One poll of the engine's metrics (the EngineBridge samples ~10×/s while a model is loaded).
// Gauges are the state at `timeSec`; counters are cumulative since the model was loaded.
struct MetricsSample {
  double timeSec = 0.0;  // seconds on the bridge's monotonic clock (comparable across samples)
  // KV cache: used + cached + free = total blocks.
  int kvTotalBlocks = 0;
  int kvUsedBlocks = 0;    // referenced by running sequences
  int kvCachedBlocks = 0;  // free but holding a reusable prefix (evicted LRU first)
  int kvFreeBlocks = 0;
  double kvUsagePercent = 0.0;  // used / total × 100
  int blockSize = 0;            // tokens per block
  // Batch slots.
  int numRunning = 0;
  int numWaiting = 0;
  int maxNumSeqs = 0;
  // Throughput over the engine's 1 s sliding window (tokens/s).
  double promptTokensPerSec = 0.0;
  double generationTokensPerSec = 0.0;
  // Counters.
  qint64 promptTokens = 0;
  qint64 generationTokens = 0;
  qint64 prefixCacheQueries = 0;  // prompt tokens looked up in the prefix cache
  qint64 prefixCacheHits = 0;     // of those, tokens found
  qint64 numPreemptions = 0;
  qint64 requestsFinished = 0;
  // Inter-token latency histogram totals (seconds, count): deltas between samples give the mean.
  double itlSumSec = 0.0;
  qint64 itlCount = 0;
  // Requests whose first token came since the previous sample: (time of first token in timeSec
  // units, TTFT in milliseconds).
  QVector<QPair<double, double>> newTtft;
};

}  // namespace lathe::ui

Q_DECLARE_METATYPE(lathe::ui::MetricsSample)
Q_DECLARE_METATYPE(lathe::ui::ModelSummary)
Q_DECLARE_METATYPE(lathe::ui::GenerationStats)
Q_DECLARE_METATYPE(lathe::ui::ChatToolReply)
Q_DECLARE_METATYPE(lathe::ui::RequestLogEntry)
