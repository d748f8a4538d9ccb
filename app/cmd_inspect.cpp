// `lathe inspect [MODEL] [--json] [--max-model-len L] [--batch B] [--memory SIZE]`: what a model is
// and what it costs in memory. The report itself is engine/model/model_report.h (shared with Lathe
// Studio's model card); this file only parses flags and prints.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.h"
#include "engine/core/strings.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_report.h"

namespace lathe::cli {

namespace {

struct InspectFlags {
  std::string model;
  bool json = false;
  int64_t max_model_len = 0;
  int64_t batch = 1;
  std::string memory;
};

int run_inspect(const InspectFlags& f) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "lathe inspect: %s\n", message.c_str());
    return 1;
  };
  if (f.max_model_len < 0)
    return fail("--max-model-len must be >= 0 (0: the model's context length)");
  if (f.batch < 1) return fail("--batch must be >= 1");
  ReportOptions options;
  options.max_model_len = f.max_model_len;
  options.batch = f.batch;
  if (!f.memory.empty()) {
    options.budget_bytes = parse_byte_size(f.memory);
    if (options.budget_bytes <= 0)
      return fail("--memory: cannot read '" + f.memory +
                  "' as a size; write it like 24GiB or 512MiB");
  }
  Result<std::string> path = resolve_model_path(f.model);
  if (!path.is_ok()) return fail(path.status().message());
  Result<ModelReport> report = inspect_model(path.value(), options);
  if (!report.is_ok()) return fail(report.status().message());
  const std::string out =
      f.json ? model_report_json(report.value()) + "\n" : model_report_text(report.value());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand("inspect",
                                     "Show a model's architecture, size, storage types and memory "
                                     "plan (weights at FP16/INT8/INT4, KV cache)");
  cmd->add_option("model", flags->model,
                  "GGUF file, Hugging Face folder, or a folder with only config.json "
                  "(default: the SmolLM2-135M-Instruct Q4_1 in the model cache)");
  cmd->add_flag("--json", flags->json, "print the report as JSON (stable keys, sizes in bytes)");
  cmd->add_option(
      "--max-model-len", flags->max_model_len,
      "tokens per sequence for the KV-cache estimate (default: the model's context length)");
  cmd->add_option("--batch", flags->batch, "concurrent sequences for the KV-cache estimate")
      ->capture_default_str();
  cmd->add_option(
      "--memory", flags->memory,
      "memory budget to check the CPU plan against, e.g. 16GiB (default: this machine's RAM)");
  cmd->callback([flags, exit_code]() { *exit_code = run_inspect(*flags); });
}

}  // namespace lathe::cli
