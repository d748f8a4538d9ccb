// Model-level helpers of the quantization tests: a synthetic Hugging Face Llama folder with
// dimensions every scheme accepts (hidden 256: k-quant blocks fit), and the CPU runner's logits of
// a model at a few positions, to compare a quantized output with its source.
#pragma once

#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/core/half.h"
#include "engine/model/model_loader.h"
#include "engine/model/tensor_names.h"
#include "engine/quant/atomic_output.h"
#include "engine/quant/safetensors_writer.h"
#include "engine/runtime/model_io.h"
#include "model/model_test_files.h"
#include "quant_test_util.h"
#include "test_support.h"

namespace lathe::test {

struct SyntheticModel {
  std::string arch = "llama";  // llama | qwen2
  int64_t hidden = 256, intermediate = 512, layers = 2, heads = 4, kv_heads = 2, vocab = 300;
  bool tied = false;
  std::string dtype = "BF16";    // BF16 | F16 | F32
  std::string bad_tensor_dtype;  // when set, blk.0.attn_q is stored in this dtype (e.g. "I8")
  // > 0: every 16th channel of attn_norm / ffn_norm is multiplied by this, so a few input channels
  // of the linears carry large activations (as in real models; AWQ's case).
  float norm_outlier_scale = 0.f;
};

// The config.json of `m` (a Hugging Face Llama or Qwen2 config).
inline std::string synthetic_config_json(const SyntheticModel& m) {
  const char* torch = m.dtype == "F16" ? "float16" : m.dtype == "F32" ? "float32" : "bfloat16";
  return "{\"architectures\": [\"" +
         std::string(m.arch == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM") +
         "\"], \"model_type\": \"" + m.arch + "\", \"hidden_size\": " + std::to_string(m.hidden) +
         ", \"intermediate_size\": " + std::to_string(m.intermediate) +
         ", \"num_hidden_layers\": " + std::to_string(m.layers) +
         ", \"num_attention_heads\": " + std::to_string(m.heads) +
         ", \"num_key_value_heads\": " + std::to_string(m.kv_heads) +
         ", \"vocab_size\": " + std::to_string(m.vocab) +
         ", \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-05, "
         "\"rope_theta\": 10000.0, \"hidden_act\": \"silu\", \"tie_word_embeddings\": " +
         (m.tied ? "true" : "false") +
         ", \"bos_token_id\": 1, \"eos_token_id\": 2, "
         "\"torch_dtype\": \"" +
         torch + "\"}";
}

// A folder with `m`'s config.json alone (a `--load-format dummy` source).
inline Status write_synthetic_config(const std::string& folder, const SyntheticModel& m) {
  std::filesystem::create_directories(folder);
  return write_small_file(folder + "/config.json", synthetic_config_json(m));
}

// Writes config.json, model.safetensors (random weights, std 0.02; norms around 1) and the tiny
// fixture's tokenizer files into `folder`.
inline Status write_synthetic_model(const std::string& folder, const SyntheticModel& m) {
  const int64_t hd = m.hidden / m.heads;
  LATHE_RETURN_IF_ERROR(write_synthetic_config(folder, m));
  ModelConfig c;
  c.arch = m.arch == "qwen2" ? Architecture::kQwen2 : Architecture::kLlama;
  c.vocab_size = m.vocab;
  c.hidden_size = m.hidden;
  c.intermediate_size = m.intermediate;
  c.num_layers = m.layers;
  c.num_heads = m.heads;
  c.num_kv_heads = m.kv_heads;
  c.head_dim = hd;
  c.tie_word_embeddings = m.tied;
  c.attention_bias = m.arch == "qwen2";
  std::vector<SafetensorsTensorSpec> specs;
  std::vector<std::vector<uint8_t>> data;
  uint32_t seed = 1000;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> v =
        random_normal(static_cast<size_t>(n), seed++, t.float_only ? 0.1f : 0.02f);
    if (t.float_only && t.name.find("norm") != std::string::npos) {
      for (float& x : v) x += 1.f;
      if (m.norm_outlier_scale > 0.f && t.name.find("output_norm") == std::string::npos &&
          t.name.find("_q_norm") == std::string::npos &&
          t.name.find("_k_norm") == std::string::npos)
        for (size_t i = 0; i < v.size(); i += 16) v[i] *= m.norm_outlier_scale;
    }
    std::string dt = m.dtype;
    if (!m.bad_tensor_dtype.empty() && t.name == "blk.0.attn_q") dt = m.bad_tensor_dtype;
    specs.push_back({hf_name_from_canonical(t.name), dt, t.shape});
    std::vector<uint8_t> b(static_cast<size_t>(*specs.back().nbytes()));
    for (size_t i = 0; i < v.size(); ++i) {
      if (dt == "F32") {
        std::memcpy(b.data() + 4 * i, &v[i], 4);
      } else if (dt == "I8" || dt == "U8" || dt == "F8_E4M3") {
        b[i] = static_cast<uint8_t>(static_cast<int8_t>(v[i] * 100));
      } else {
        const uint16_t h = dt == "F16" ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
        std::memcpy(b.data() + 2 * i, &h, 2);
      }
    }
    data.push_back(std::move(b));
  }
  LATHE_ASSIGN_OR_RETURN(SafetensorsWriter w,
                         SafetensorsWriter::create(folder + "/model.safetensors", specs));
  for (size_t i = 0; i < specs.size(); ++i)
    LATHE_RETURN_IF_ERROR(w.write(specs[i].name, data[i].data(), data[i].size()));
  LATHE_RETURN_IF_ERROR(w.finish());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    const std::vector<uint8_t> b =
        read_file_bytes(fixture_path(std::string("model/tiny_llama/") + f));
    LATHE_RETURN_IF_ERROR(write_small_file(folder + "/" + f, std::string(b.begin(), b.end())));
  }
  return Status();
}

// Logits [prefixes, vocab] of `model` after each prefix length of `tokens` (one sequence per
// prefix, prefilled in one step on the CPU).
inline Result<std::vector<float>> prefix_logits(const std::string& model,
                                                const std::vector<int32_t>& tokens,
                                                const std::vector<int32_t>& lengths) {
  LoadOptions options;
  options.load_tokenizer = false;
  LATHE_ASSIGN_OR_RETURN(LoadedModel m, load_model(model, options));
  CpuRunnerOptions ro;
  ro.num_threads = 2;
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, create_cpu_model_runner(m, ro));
  constexpr int32_t kBlock = 16;
  int32_t max_blocks = 0;
  for (int32_t len : lengths) max_blocks = std::max(max_blocks, (len + kBlock - 1) / kBlock);
  LATHE_RETURN_IF_ERROR(
      runner->allocate_kv_cache(max_blocks * static_cast<int32_t>(lengths.size()), kBlock));
  ModelInput in;
  in.query_start.push_back(0);
  in.max_blocks_per_seq = max_blocks;
  int32_t next_block = 0;
  for (int32_t len : lengths) {
    std::vector<int32_t> blocks;
    for (int32_t b = 0; b < (len + kBlock - 1) / kBlock; ++b) blocks.push_back(next_block++);
    for (int32_t p = 0; p < len; ++p) {
      in.token_ids.push_back(tokens[static_cast<size_t>(p)]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(int64_t{blocks[static_cast<size_t>(p / kBlock)]} * kBlock +
                                p % kBlock);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(len);
    std::vector<int32_t> row(static_cast<size_t>(max_blocks), 0);
    std::copy(blocks.begin(), blocks.end(), row.begin());
    in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
    in.max_seq_len = std::max(in.max_seq_len, len);
    in.max_query_len = std::max(in.max_query_len, len);
    in.sample_seqs.push_back(in.num_seqs() - 1);
    SamplingRow greedy;
    greedy.temperature = 0.f;
    in.sampling.push_back(greedy);
  }
  return runner->compute_logits(in);
}

// ||a - b|| / ||b - mean(b)|| over all logits.
inline double relative_logit_error(const std::vector<float>& a, const std::vector<float>& b) {
  double mean = 0;
  for (float v : b) mean += v;
  mean /= double(b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += (double(b[i]) - mean) * (double(b[i]) - mean);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace lathe::test
