// The tensors of a loaded model under canonical names, in PyTorch shape order, pointing into
// memory-mapped files (or, for converted tensors, into buffers the store owns).
//
// Canonical names (the same for every file format; loaders translate):
//   token_embd                 [vocab, hidden]
//   output_norm                [hidden]
//   output                     [vocab, hidden]       absent when embeddings are tied
//   blk.{i}.attn_norm          [hidden]
//   blk.{i}.attn_q / _k / _v   [q_size | kv_size, hidden]
//   blk.{i}.attn_q_bias / _k_bias / _v_bias  [q_size | kv_size]    (Qwen2)
//   blk.{i}.attn_q_norm / attn_k_norm        [head_dim]            (Qwen3)
//   blk.{i}.attn_output        [hidden, q_size]
//   blk.{i}.ffn_norm           [hidden]
//   blk.{i}.ffn_gate / ffn_up  [intermediate, hidden]
//   blk.{i}.ffn_down           [hidden, intermediate]
// A linear weight [N, K] maps K inputs to N outputs: y = W x.
// Not in the store: GGUF rope_freqs.weight becomes ModelConfig::rope_freq_factors; Hugging Face
// rotary inv_freq buffers are ignored (rope_inverse_frequencies() in model_config.h recomputes
// them).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/mapped_file.h"
#include "engine/core/status.h"
#include "engine/core/tensor_view.h"

namespace lathe {

class WeightStore {
 public:
  // Adds a tensor; the memory must outlive the store (keep_alive / own ensure it).
  void add(const std::string& name, const TensorView& view) { tensors_[name] = view; }
  void keep_alive(std::shared_ptr<MappedFile> file) { files_.push_back(std::move(file)); }
  // Takes ownership of a buffer and returns a pointer to its bytes (stable for the store's life).
  uint8_t* own(std::vector<uint8_t> buffer);

  const TensorView* find(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // The tensor, checked against an expected shape; the error names the tensor and both shapes.
  Result<TensorView> get(const std::string& name,
                         std::initializer_list<int64_t> expected_shape) const;

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  size_t size() const { return tensors_.size(); }
  int64_t total_bytes() const;

  static std::string layer_name(int64_t layer, const char* suffix) {
    return "blk." + std::to_string(layer) + "." + suffix;
  }

 private:
  std::map<std::string, TensorView> tensors_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
};

}  // namespace lathe
