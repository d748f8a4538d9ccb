#include "app/engine_flags.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <climits>
#include <fstream>
#include <sstream>

#include "engine/core/strings.h"

namespace lathe::cli {

void add_engine_flags(CLI::App& cmd, EngineFlags& f, bool with_model_option) {
  if (with_model_option)
    cmd.add_option("-m,--model", f.model,
                   "GGUF file or Hugging Face model folder (default: the SmolLM2-135M-Instruct "
                   "Q4_1 in the model cache)");
  cmd.add_option("--device", f.device, "cpu, cuda, or auto (the GPU when one is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd.add_option("--dtype", f.dtype, "GPU compute dtype: auto (bf16), bf16, f16")
      ->check(CLI::IsMember({"auto", "bf16", "bfloat16", "f16", "float16", "half"}))
      ->capture_default_str();
  cmd.add_option(
         "--load-format", f.load_format,
         "auto (read the weights), or dummy (random weights of the config's shape, for benchmarks)")
      ->check(CLI::IsMember({"auto", "dummy"}))
      ->capture_default_str();
  cmd.add_option("--quantization,-q", f.quantization,
                 "quantize a 16-bit checkpoint's layer weights at load, round-to-nearest (vLLM's "
                 "--quantization): fp8 (e4m3, per-tensor scales), int8 (per-channel), int4 "
                 "(g128); with --load-format dummy also random weights in GGUF block types "
                 "(the CUDA backend): q4_k_m, q4_k, q4_0, q8_0, q5_k_m, q6_k, q4_1, q5_0, q5_1, q2_k, "
                 "q3_k");
  cmd.add_option(
      "--kv-cache-memory", f.kv_cache_memory,
      "memory for the KV cache, e.g. 512MiB or 2GiB (default: CPU min(1 GiB, 25% of RAM); GPU "
      "what --gpu-memory-utilization leaves, which also caps this)");
  cmd.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "GPU: share of device memory Lathe may use, in (0, 1]")
      ->capture_default_str();
  cmd.add_option("--max-model-len", f.max_model_len,
                 "prompt + output tokens per sequence (default: the model's context length)");
  cmd.add_option("--max-num-seqs", f.max_num_seqs,
                 "sequences per step (batch slots; default 256 GPU, 64 CPU)");
  cmd.add_option(
      "--max-num-batched-tokens", f.max_num_batched_tokens,
      "tokens per step, prefill chunks and decodes together (default 8192 GPU, 512 CPU)");
  cmd.add_option("--block-size", f.block_size, "tokens per KV-cache block")->capture_default_str();
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.enable_prefix_caching,
               "share KV blocks between requests with a common prefix (default on)");
  cmd.add_option("--scheduling", f.scheduling,
                 "continuous (iteration-level batching) or static (run each batch to its end)")
      ->check(CLI::IsMember({"continuous", "static"}))
      ->capture_default_str();
  cmd.add_option("--threads", f.num_threads, "CPU threads (default: all hardware threads)");
  cmd.add_flag("--enforce-eager", f.enforce_eager, "CUDA: do not capture CUDA graphs");
  cmd.add_option("--chat-template", f.chat_template,
                 "Jinja file that replaces the model's chat template");
  cmd.add_option("--speculative-config", f.speculative_config,
                 "speculative decoding as JSON, e.g. '{\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, "
                 "\"prompt_lookup_min\": 2}' (prompt lookup; outputs are unchanged)");
}

Result<SpeculativeConfig> parse_speculative_config(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument(
        "--speculative-config must be a JSON object such as '{\"method\": "
        "\"ngram\", \"num_speculative_tokens\": 4}', got '" +
        text + "'");
  SpeculativeConfig c;
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      if (!value.is_string() || !parse_speculative_method(value.get<std::string>(), &c.method))
        return invalid_argument(
            "--speculative-config: method must be \"ngram\" (the one method "
            "Lathe has), got " +
            value.dump());
      continue;
    }
    int32_t* field = key == "num_speculative_tokens" ? &c.num_speculative_tokens
                     : key == "prompt_lookup_min"    ? &c.prompt_lookup_min
                     : key == "prompt_lookup_max"    ? &c.prompt_lookup_max
                                                     : nullptr;
    if (field == nullptr)
      return invalid_argument("--speculative-config: unknown key \"" + key +
                              "\" (known: method, num_speculative_tokens, prompt_lookup_min, "
                              "prompt_lookup_max)");
    if (!value.is_number_integer() || value.get<int64_t>() < INT32_MIN ||
        value.get<int64_t>() > INT32_MAX)
      return invalid_argument("--speculative-config: " + key + " must be an integer, got " +
                              value.dump());
    *field = static_cast<int32_t>(value.get<int64_t>());
  }
  return c;
}

Result<EngineConfig> resolve_engine_flags(const EngineFlags& f) {
  EngineConfig c;
  c.model_path = f.model;
  if (!parse_device_kind(f.device, &c.device.device))
    return invalid_argument("--device must be cpu, cuda or auto, got '" + f.device + "'");
  c.device.dtype = f.dtype;
  c.device.num_threads = f.num_threads;
  c.device.enforce_eager = f.enforce_eager;
  c.load.load_format = f.load_format == "dummy" ? LoadFormat::kDummy : LoadFormat::kAuto;
  if (!f.quantization.empty())
    LATHE_RETURN_IF_ERROR(parse_quantization_option(f.quantization,
                                                    c.load.load_format == LoadFormat::kDummy,
                                                    &c.load.quantization, &c.load.dummy_gguf));
  if (!f.kv_cache_memory.empty()) {
    const int64_t bytes = parse_byte_size(f.kv_cache_memory);
    if (bytes <= 0)
      return invalid_argument("--kv-cache-memory: cannot read '" + f.kv_cache_memory +
                              "' as a size; write it like 512MiB or 2GiB");
    c.cache.kv_cache_memory_bytes = bytes;
  }
  c.cache.gpu_memory_utilization = f.gpu_memory_utilization;
  c.cache.block_size = f.block_size;
  c.cache.enable_prefix_caching = f.enable_prefix_caching;
  c.scheduler.max_model_len = f.max_model_len;
  c.scheduler.max_num_seqs = f.max_num_seqs;
  c.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  c.scheduler.policy =
      f.scheduling == "static" ? SchedulingPolicy::kStatic : SchedulingPolicy::kContinuous;
  if (!f.chat_template.empty()) {
    std::ifstream in(f.chat_template);
    if (!in) return not_found("--chat-template: cannot read '" + f.chat_template + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    c.load.chat_template_override = ss.str();
  }
  if (!f.speculative_config.empty()) {
    LATHE_ASSIGN_OR_RETURN(c.speculative, parse_speculative_config(f.speculative_config));
  }
  // max_num_seqs / max_num_batched_tokens left at 0 get the device's defaults in the engine.
  LATHE_RETURN_IF_ERROR(validate_engine_config(c));
  return c;
}

}  // namespace lathe::cli
