// lathe_dummy_gguf: writes a GGUF file of random weights at a model's shape, in a llama.cpp file
// type's tensor mix (engine/quant/dummy_gguf_file.h), for benchmarking llama.cpp and Lathe on the
// same file where the file cannot travel (scripts/gpu/llamacpp-bench.sh on the GPU machine).
//
//   lathe_dummy_gguf --config benchmarks/configs/llama-3.1-8b --type q4_k_m --output /tmp/m.gguf
//       [--vocab ggml-vocab-llama-bpe.gguf] [--seed N] [--threads N] [--sync]
// --config: a config.json, or a folder holding one. --type: q4_k_m, q5_k_m, q4_0, q8_0, q6_k.
// --vocab: a GGUF file whose tokenizer.* keys the file gets (llama.cpp needs a vocabulary; its
// vocab-only files fit, scripts/fetch-test-assets.sh); its token count must be the config's
// vocab_size.
// Prints, one per line (seconds, bytes):
//   dummy_gguf.file FILE
//   dummy_gguf.types q4_k x193, q6_k x33, f32 x66
//   dummy_gguf.file_bytes N
//   dummy_gguf.tensor_bytes N
//   dummy_gguf.weight_bytes_per_token N    (every tensor but token_embd: a decode step's reads)
//   dummy_gguf.seconds S
// Exit status 0, or 1 with the error on stderr, 2 for a bad command line.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "engine/core/strings.h"
#include "engine/model/model_config_parse.h"
#include "engine/quant/dummy_gguf_file.h"
#include "engine/quant/tokenizer_export.h"

using namespace lathe;

namespace {

constexpr const char* kUsage =
    "usage: lathe_dummy_gguf --config CONFIG --type TYPE --output FILE [--vocab GGUF] [--seed N] "
    "[--threads N] [--sync]\n"
    "  TYPE: q4_k_m, q5_k_m, q4_0, q8_0, q6_k\n";

int bad_usage(const std::string& m) {
  std::fprintf(stderr, "lathe_dummy_gguf: %s\n%s", m.c_str(), kUsage);
  return 2;
}

int fail(const Status& s) {
  std::fprintf(stderr, "lathe_dummy_gguf: %s\n", s.message().c_str());
  return 1;
}

// A whole non-negative decimal number, or nullopt.
std::optional<int64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(s);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, type_name, output, vocab;
  DummyGgufFileOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a == "--sync") {
      o.sync = true;
      continue;
    }
    if (i + 1 >= argc) return bad_usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--config") {
      config_path = v;
    } else if (a == "--type") {
      type_name = v;
    } else if (a == "--output" || a == "-o") {
      output = v;
    } else if (a == "--vocab") {
      vocab = v;
    } else if (a == "--seed" || a == "--threads") {
      const std::optional<int64_t> n = parse_count(v);
      if (!n.has_value() || (a == "--threads" && *n > 4096))
        return bad_usage(a + " must be a whole number" + (a == "--threads" ? " up to 4096" : "") +
                         ", got '" + v + "'");
      if (a == "--seed")
        o.seed = static_cast<uint64_t>(*n);
      else
        o.num_threads = static_cast<int>(*n);
    } else {
      return bad_usage("unknown option " + a);
    }
  }
  if (config_path.empty() || type_name.empty() || output.empty())
    return bad_usage("--config, --type and --output are required");
  const std::optional<GgufFileType> ft = parse_gguf_file_type(type_name);
  if (!ft.has_value())
    return bad_usage("--type must be q4_k_m, q5_k_m, q4_0, q8_0 or q6_k, got '" + type_name + "'");
  o.file_type = *ft;

  std::error_code ec;
  if (std::filesystem::is_directory(config_path, ec)) config_path += "/config.json";
  Result<ModelConfig> c = load_hf_config(config_path);
  if (!c.is_ok()) return fail(c.status());
  if (!vocab.empty()) {
    Result<GgufMetadata> tok = gguf_tokenizer_metadata_from_gguf(vocab, c->vocab_size);
    if (!tok.is_ok()) return fail(tok.status());
    o.tokenizer = *std::move(tok);
  }
  const auto t0 = std::chrono::steady_clock::now();
  Result<DummyGgufFileReport> r = write_dummy_gguf_file(*c, output, o);
  if (!r.is_ok()) return fail(r.status());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string types;
  for (const auto& [t, n] : r->type_counts)
    types += (types.empty() ? "" : ", ") + t + " x" + std::to_string(n);
  std::printf("dummy_gguf.file %s\n", output.c_str());
  std::printf("dummy_gguf.types %s\n", types.c_str());
  std::printf("dummy_gguf.file_bytes %lld\n", static_cast<long long>(r->file_bytes));
  std::printf("dummy_gguf.tensor_bytes %lld\n", static_cast<long long>(r->tensor_bytes));
  std::printf("dummy_gguf.weight_bytes_per_token %lld\n",
              static_cast<long long>(r->weight_bytes_per_token()));
  std::printf("dummy_gguf.seconds %.2f\n", s);
  return 0;
}
