// Helpers of the quantized-format tests: the fixtures of tests/fixtures/formats/ (made by
// scripts/fixtures/make_quant_format_fixtures.py), a copy-and-edit of a checkpoint's tensors and
// config (for bad input), and the CPU runner's logits over prefill and decode steps of one and of
// several sequences.
#pragma once

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/core/read_file.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors_file.h"
#include "engine/quant/atomic_output.h"
#include "engine/quant/safetensors_writer.h"
#include "engine/runtime/model_io.h"
#include "test_support.h"

namespace lathe::test {

inline std::string formats_fixture(const std::string& name) {
  return fixture_path("formats/" + name);
}

// A checkpoint's tensors as bytes, by file name, for editing.
struct StoredTensor {
  std::string dtype;  // safetensors name
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
using TensorMap = std::map<std::string, StoredTensor>;

inline Result<TensorMap> read_tensors(const std::string& folder) {
  LATHE_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::open_folder(folder));
  TensorMap out;
  for (const auto& [name, e] : ckpt.tensors())
    out[name] =
        StoredTensor{e.tensor->dtype_name, e.tensor->shape,
                     std::vector<uint8_t>(e.tensor->data, e.tensor->data + e.tensor->nbytes())};
  return out;
}

// Writes `config` as config.json and `tensors` as model.safetensors into a new folder `dst`.
inline Status write_checkpoint(const std::string& dst, const nlohmann::json& config,
                               const TensorMap& tensors) {
  std::filesystem::create_directories(dst);
  LATHE_RETURN_IF_ERROR(write_small_file(dst + "/config.json", config.dump(1)));
  std::vector<SafetensorsTensorSpec> specs;
  for (const auto& [name, t] : tensors) specs.push_back({name, t.dtype, t.shape});
  LATHE_ASSIGN_OR_RETURN(SafetensorsWriter w,
                         SafetensorsWriter::create(dst + "/model.safetensors", specs));
  for (const auto& [name, t] : tensors)
    LATHE_RETURN_IF_ERROR(w.write(name, t.bytes.data(), t.bytes.size()));
  return w.finish();
}

// A copy of fixture `name` in `dst` with its config and tensors edited.
inline Status edited_copy(const std::string& name, const std::string& dst,
                          const std::function<void(nlohmann::json&)>& edit_config,
                          const std::function<void(TensorMap&)>& edit_tensors) {
  const std::string src = formats_fixture(name);
  LATHE_ASSIGN_OR_RETURN(std::string text, read_file(src + "/config.json"));
  nlohmann::json config = nlohmann::json::parse(text);
  LATHE_ASSIGN_OR_RETURN(TensorMap tensors, read_tensors(src));
  if (edit_config) edit_config(config);
  if (edit_tensors) edit_tensors(tensors);
  return write_checkpoint(dst, config, tensors);
}

inline void set_words(StoredTensor& t, uint32_t value) {
  for (size_t i = 0; i + 4 <= t.bytes.size(); i += 4) std::memcpy(t.bytes.data() + i, &value, 4);
}

// Logits of a fixed scenario on the CPU runner (2 threads): three sequences prefilled in one step
// (lengths 5, 3, 7), then three decode steps of all three; then sequence 0 alone, prefilled and
// decoded twice. All sampled rows' logits, in order. Token ids are below `vocab`.
inline Result<std::vector<float>> scenario_logits(const LoadedModel& model) {
  CpuRunnerOptions ro;
  ro.num_threads = 2;
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, create_cpu_model_runner(model, ro));
  constexpr int32_t kBlock = 4, kBlocksPerSeq = 4;
  LATHE_RETURN_IF_ERROR(runner->allocate_kv_cache(4 * kBlocksPerSeq, kBlock));
  const int32_t vocab = static_cast<int32_t>(model.config.vocab_size);
  struct Seq {
    std::vector<int32_t> tokens;
    int32_t computed = 0;
    int32_t first_block = 0;
  };
  auto tokens = [&](int32_t seed, int32_t n) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < n; ++i) t.push_back((seed * 7 + i * 5 + 3) % vocab);
    return t;
  };
  std::vector<Seq> seqs = {
      {tokens(1, 8), 0, 0}, {tokens(2, 6), 0, 4}, {tokens(3, 10), 0, 8}, {tokens(1, 8), 0, 12}};
  std::vector<float> all;
  auto step = [&](const std::vector<std::pair<int, int32_t>>& work) -> Status {
    ModelInput in;
    in.query_start.push_back(0);
    in.max_blocks_per_seq = kBlocksPerSeq;
    for (const auto& [i, n] : work) {
      Seq& s = seqs[static_cast<size_t>(i)];
      for (int32_t j = 0; j < n; ++j) {
        const int32_t pos = s.computed + j;
        in.token_ids.push_back(s.tokens[static_cast<size_t>(pos)]);
        in.positions.push_back(pos);
        in.slot_mapping.push_back(int64_t{s.first_block + pos / kBlock} * kBlock + pos % kBlock);
      }
      s.computed += n;
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(s.computed);
      for (int32_t b = 0; b < kBlocksPerSeq; ++b) in.block_tables.push_back(s.first_block + b);
      in.max_seq_len = std::max(in.max_seq_len, s.computed);
      in.max_query_len = std::max(in.max_query_len, n);
      in.sample_seqs.push_back(in.num_seqs() - 1);
      SamplingRow greedy;
      greedy.temperature = 0.f;
      in.sampling.push_back(greedy);
    }
    LATHE_ASSIGN_OR_RETURN(std::vector<float> logits, runner->compute_logits(in));
    all.insert(all.end(), logits.begin(), logits.end());
    return Status();
  };
  LATHE_RETURN_IF_ERROR(step({{0, 5}, {1, 3}, {2, 7}}));  // prefill, several sequences
  for (int d = 0; d < 3; ++d) LATHE_RETURN_IF_ERROR(step({{0, 1}, {1, 1}, {2, 1}}));  // decode
  LATHE_RETURN_IF_ERROR(step({{3, 6}}));                              // batch 1: prefill
  for (int d = 0; d < 2; ++d) LATHE_RETURN_IF_ERROR(step({{3, 1}}));  // batch 1: decode
  return all;
}

inline Result<std::vector<float>> scenario_logits(const std::string& path,
                                                  const LoadOptions& options = {}) {
  LoadOptions o = options;
  o.load_tokenizer = false;
  LATHE_ASSIGN_OR_RETURN(LoadedModel m, load_model(path, o));
  return scenario_logits(m);
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return d;
}

// ||a - b|| / ||b||.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace lathe::test
