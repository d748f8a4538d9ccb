#include "engine/eval/evaluate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "engine/core/strings.h"
#include "engine/eval/eval_text.h"
#include "engine/eval/eval_windows.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/runner_factory.h"

namespace lathe {
namespace {

constexpr int32_t kBlockSize = 16;
// Characters of the text the reference's tokenizer must tokenize exactly as the model's.
constexpr size_t kTokenizerCheckChars = 8192;

// A model and its runner, with a KV cache of one window. The model sits behind a pointer: the
// runner may keep references into it.
struct EvalModel {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<ModelRunner> runner;
};

Result<EvalModel> open_model(const std::string& path, const EvalConfig& c, DeviceKind device,
                             const char* role) {
  EvalModel m;
  Result<LoadedModel> loaded = load_model(path);
  if (!loaded.is_ok()) return loaded.status().with_context(role);
  m.model = std::make_unique<LoadedModel>(std::move(loaded).value());
  EngineConfig ec;
  ec.model_path = path;
  ec.device = c.device;
  ec.device.enforce_eager = true;  // prefill chunks only: no decode graphs to capture
  ec.scheduler.max_num_batched_tokens = c.logit_rows;
  ec.scheduler.max_num_seqs = c.logit_rows;  // CUDA sizes its logits rows from both
  ec.scheduler.max_model_len = c.context;
  ec.cache.block_size = kBlockSize;
  LATHE_ASSIGN_OR_RETURN(m.runner, create_model_runner(*m.model, ec, device));
  const int32_t blocks = (c.context + kBlockSize - 1) / kBlockSize;
  LATHE_RETURN_IF_ERROR(m.runner->allocate_kv_cache(blocks, kBlockSize));
  return m;
}

// One forward step of a window: tokens [c0, c1) of `tokens` (the window), logits of the trailing
// `rows` of them.
ModelInput chunk_input(const std::vector<TokenId>& tokens, int32_t c0, int32_t c1, int32_t rows,
                       int32_t blocks) {
  ModelInput in;
  for (int32_t p = c0; p < c1; ++p) {
    in.token_ids.push_back(tokens[static_cast<size_t>(p)]);
    in.positions.push_back(p);
    in.slot_mapping.push_back(p);  // block b holds positions [16 b, 16 b + 16): table = identity
  }
  in.query_start = {0, c1 - c0};
  in.seq_lens = {c1};
  in.max_blocks_per_seq = blocks;
  for (int32_t b = 0; b < blocks; ++b) in.block_tables.push_back(b);
  in.max_seq_len = c1;
  in.max_query_len = c1 - c0;
  in.sample_seqs = {0};
  in.sample_counts = {rows};
  SamplingRow greedy;
  greedy.temperature = 0.f;
  in.sampling.assign(static_cast<size_t>(rows), greedy);
  return in;
}

Status check_same_tokenizer(const EvalModel& model, const EvalModel& ref, const std::string& text) {
  const int64_t v = model.runner->vocab_size(), rv = ref.runner->vocab_size();
  if (v != rv)
    return invalid_argument(strformat(
        "the model has a vocabulary of %lld tokens and the reference %lld: KL divergence needs "
        "the same vocabulary; pass a reference of the same model family",
        static_cast<long long>(v), static_cast<long long>(rv)));
  if (model.model->tokenizer == nullptr || ref.model->tokenizer == nullptr) return Status();
  std::string head = text.substr(0, std::min(text.size(), kTokenizerCheckChars));
  head.resize(valid_utf8_prefix(head));
  EncodeOptions o;
  o.add_special_tokens = false;
  const std::vector<TokenId> a = model.model->tokenizer->encode(head, o);
  const std::vector<TokenId> b = ref.model->tokenizer->encode(head, o);
  if (a != b)
    return invalid_argument(
        "the model's and the reference's tokenizers split the text differently; the figures "
        "would compare different tokens: pass a reference with the model's tokenizer");
  return Status();
}

}  // namespace

Result<EvalReport> evaluate(const EvalConfig& config, const EvalProgressFn& progress,
                            const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  EvalConfig c = config;
  if (c.stride == 0) c.stride = std::max(1, c.context / 2);
  if (c.logit_rows < 1)
    return invalid_argument(strformat("logit_rows must be >= 1, got %d", c.logit_rows));
  EvalReport report;
  report.model = c.model;
  report.reference = c.reference;
  std::string text = c.text;
  if (text.empty()) {
    if (c.text_file.empty()) return invalid_argument("no text given: pass --text FILE");
    LATHE_ASSIGN_OR_RETURN(text, read_text_file(c.text_file, "--text"));
    report.text_origin = c.text_file;
  } else {
    LATHE_RETURN_IF_ERROR(check_text(text, "(text)", "the text"));
    report.text_origin = "(text)";
  }
  // Window sizes are checked before anything is loaded.
  LATHE_RETURN_IF_ERROR(
      plan_eval_windows(c.context, c.context, c.stride, c.max_windows, c.score_from).status());

  LATHE_ASSIGN_OR_RETURN(DeviceSelection device, select_device(c.device));
  LATHE_ASSIGN_OR_RETURN(EvalModel model, open_model(c.model, c, device.device, "model"));
  if (model.model->tokenizer == nullptr)
    return invalid_argument(c.model + " has no tokenizer; evaluation needs one to read the text");
  const bool with_ref = !c.reference.empty();
  EvalModel ref;
  if (with_ref) {
    LATHE_ASSIGN_OR_RETURN(ref, open_model(c.reference, c, device.device, "reference"));
    LATHE_RETURN_IF_ERROR(check_same_tokenizer(model, ref, text));
  }
  report.device = model.runner->memory_info().device_name;

  const Tokenizer& tok = *model.model->tokenizer;
  EncodeOptions enc;
  enc.add_special_tokens = false;
  enc.parse_special = false;  // the text is data: "<|im_start|>" in it is text
  const std::vector<TokenId> ids = tok.encode(text, enc);
  report.text_tokens = static_cast<int64_t>(ids.size());
  LATHE_ASSIGN_OR_RETURN(
      std::vector<EvalWindow> windows,
      plan_eval_windows(report.text_tokens, c.context, c.stride, c.max_windows, c.score_from));
  report.context = c.context;
  report.stride = c.stride;
  report.score_from = c.score_from;
  report.windows = static_cast<int32_t>(windows.size());

  const int64_t vocab = model.runner->vocab_size();
  const int32_t blocks = (c.context + kBlockSize - 1) / kBlockSize;
  EvalAccumulator acc;
  std::vector<TokenId> window(static_cast<size_t>(c.context));
  for (size_t w = 0; w < windows.size(); ++w) {
    const EvalWindow& win = windows[w];
    std::copy_n(ids.begin() + win.begin, c.context, window.begin());
    if (tok.add_bos() && tok.bos_id() >= 0) window[0] = tok.bos_id();
    // Logits at offsets [first_target - 1, context - 1) predict targets [first_target, context).
    const int32_t first_logit = win.first_target - 1, end_logit = c.context - 1;
    for (int32_t c0 = 0; c0 < c.context; c0 += c.logit_rows) {
      if (cancel != nullptr && cancel->load()) return cancelled("evaluation interrupted");
      const int32_t c1 = std::min(c.context, c0 + c.logit_rows);
      // Rows of this chunk whose logits are scored: [max(c0, first_logit), min(c1, end_logit)).
      const int32_t r0 = std::max(c0, first_logit), r1 = std::min(c1, end_logit);
      const int32_t rows = r1 > r0 ? c1 - r0 : 1;  // trailing rows; 1 when nothing is scored
      const ModelInput in = chunk_input(window, c0, c1, rows, blocks);
      LATHE_ASSIGN_OR_RETURN(std::vector<float> logits, model.runner->compute_logits(in));
      std::vector<float> ref_logits;
      if (with_ref) {
        LATHE_ASSIGN_OR_RETURN(ref_logits, ref.runner->compute_logits(in));
      }
      if (r1 <= r0) continue;
      const int32_t first_row = c1 - rows;
      for (int32_t p = r0; p < r1; ++p) {
        const int64_t row = p - first_row;
        const float* l = logits.data() + row * vocab;
        const TokenId target = window[static_cast<size_t>(p + 1)];
        acc.add(with_ref ? score_position(l, ref_logits.data() + row * vocab, vocab, target)
                         : score_position(l, vocab, target),
                with_ref);
      }
    }
    if (progress) {
      EvalProgress p;
      p.windows_done = static_cast<int32_t>(w) + 1;
      p.windows_total = report.windows;
      p.perplexity = acc.perplexity();
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
      p.eta_s = p.elapsed_s * static_cast<double>(report.windows - p.windows_done) /
                static_cast<double>(p.windows_done);
      progress(p);
    }
  }
  report.scored = acc.count();
  report.mean_nll = acc.mean_nll();
  report.perplexity = acc.perplexity();
  report.has_reference = with_ref;
  if (with_ref) {
    report.reference_perplexity = acc.reference_perplexity();
    report.ppl_ratio = report.perplexity / report.reference_perplexity;
    report.kld = acc.kld();
    report.top1_agreement = acc.top1_agreement();
    report.mean_delta_p = acc.mean_delta_p();
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace lathe
