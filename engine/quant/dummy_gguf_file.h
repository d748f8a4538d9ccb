// A GGUF file of random weights at a model's shape, laid out as `lathe quantize --scheme TYPE`
// lays out a real checkpoint's (gguf_tensor_plan.h: llama.cpp's names, order and tensor-type mix,
// general.file_type, the <arch>.* keys of config_export.h, a rope_freqs tensor for Llama 3 rope
// scaling), for benchmarks that need the file itself: llama.cpp's llama-bench against Lathe on the
// same file (scripts/gpu/llamacpp-bench.sh). An 8B file cannot travel to the GPU machine, so it is
// written there, streamed: one chunk of whole blocks at a time, filled by a thread pool.
//
// Values: each quantized block has random quants under the constant scales of the engine's own
// GGUF dummy weights (engine/model/dummy_gguf.h, gguf_dummy_block: f16 d (and dmin) giving weights
// of std ~0.02, every sub-block scale 1), so every value is finite and a forward pass stays finite;
// f16 tensors (the mix's fallback for rows no block divides) are uniform with std 0.02; f32 norms
// are 1, biases 0, rope_freqs the config's factors. The random bytes depend only on the seed, the
// tensor's index and the byte's offset in it (SplitMix64 of a counter), not on the thread count or
// the chunk size. Speed and memory only: the model computes nothing meaningful.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/core/status.h"
#include "engine/model/model_config.h"
#include "engine/quant/gguf_type_mix.h"
#include "engine/quant/gguf_writer.h"

namespace lathe {

struct DummyGgufFileOptions {
  GgufFileType file_type = GgufFileType::kQ4_K_M;
  // tokenizer.* keys (gguf_tokenizer_metadata_from_gguf); empty: the file has no vocabulary
  // (Lathe loads it without a tokenizer; llama.cpp needs one).
  GgufMetadata tokenizer;
  uint64_t seed = 0;
  int num_threads = 0;  // <= 0: one per hardware thread
  // fsync the file before returning; off by default: a benchmark input in /tmp loses nothing in a
  // crash, and an fsync of 8 GB can cost seconds of the GPU machine's time.
  bool sync = false;
};

struct DummyGgufFileReport {
  int64_t file_bytes = 0;
  int64_t tensor_bytes = 0;     // every tensor's data, as stored
  int64_t embedding_bytes = 0;  // token_embd's: a decode step reads one row of it per token
  std::map<std::string, int> type_counts;  // "q4_k" -> number of tensors
  // Weight bytes a decode step reads (every tensor but the embedding, the LM head included).
  int64_t weight_bytes_per_token() const { return tensor_bytes - embedding_bytes; }
};

// Writes the file at `path` (replacing it). kResourceExhausted when the disk lacks the space
// (checked before writing); I/O errors name the file. A failed write removes the partial file (a
// regular file; /dev/null stays, and takes a file for timing the generation alone).
Result<DummyGgufFileReport> write_dummy_gguf_file(const ModelConfig& config,
                                                  const std::string& path,
                                                  const DummyGgufFileOptions& options);

}  // namespace lathe
