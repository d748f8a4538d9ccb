// Writing safetensors files (the layout engine/model/safetensors_file.h reads, FORMATS.md): u64 N,
// N bytes of JSON header padded with spaces to a multiple of 8, then the tensors' bytes in header
// order, contiguous. The tensors are declared up front (so the header can be written first and the
// expected size is known before any work), then their bytes are streamed in the declared order.
// A folder writer shards them into model-0000i-of-0000n.safetensors with
// model.safetensors.index.json when they exceed a shard size, else writes model.safetensors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/atomic_output.h"

namespace lathe {

struct SafetensorsTensorSpec {
  std::string name;
  std::string dtype;           // "F32", "F16", "BF16", "I32", "I8", "U8", "F8_E4M3", ...
  std::vector<int64_t> shape;  // PyTorch order

  // Bytes of the data; nullopt for an unknown dtype string.
  std::optional<int64_t> nbytes() const;
};

// The header text (without the length prefix and padding) and the whole file's size.
std::string safetensors_header_json(const std::vector<SafetensorsTensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata);
int64_t safetensors_file_size(const std::vector<SafetensorsTensorSpec>& tensors,
                              const std::map<std::string, std::string>& metadata);

class SafetensorsWriter {
 public:
  // Creates `path` and writes the header. kInvalidArgument for an unknown dtype, a negative
  // dimension or a duplicate name.
  static Result<SafetensorsWriter> create(const std::string& path,
                                          std::vector<SafetensorsTensorSpec> tensors,
                                          const std::map<std::string, std::string>& metadata = {});

  // The next declared tensor's bytes: `name` must be the next one and `n` its exact size.
  Status write(const std::string& name, const void* data, size_t n);
  // Checks every tensor was written, then fsyncs and closes.
  Status finish();

  const std::vector<SafetensorsTensorSpec>& tensors() const { return tensors_; }

 private:
  SafetensorsWriter() = default;
  std::unique_ptr<FileWriter> file_;
  std::vector<SafetensorsTensorSpec> tensors_;
  size_t next_ = 0;
};

// A model folder's weights: one file, or shards of at most max_shard_bytes each (a tensor larger
// than that gets a shard of its own) with the index.
class SafetensorsFolderWriter {
 public:
  static constexpr int64_t kDefaultShardBytes = int64_t{5} << 30;  // 5 GiB, as transformers

  static Result<SafetensorsFolderWriter> create(
      const std::string& folder, std::vector<SafetensorsTensorSpec> tensors,
      int64_t max_shard_bytes = kDefaultShardBytes,
      const std::map<std::string, std::string>& metadata = {});
  // Bytes of all files this writer will produce (shards and index).
  static int64_t expected_bytes(const std::vector<SafetensorsTensorSpec>& tensors,
                                int64_t max_shard_bytes = kDefaultShardBytes);

  Status write(const std::string& name, const void* data, size_t n);
  // Finishes the last shard and writes the index when sharded.
  Status finish();

  int num_shards() const { return static_cast<int>(shards_.size()); }

 private:
  SafetensorsFolderWriter() = default;
  Status open_shard(size_t i);

  std::string folder_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::vector<SafetensorsTensorSpec>> shards_;
  std::vector<std::string> shard_names_;
  size_t current_ = 0;
  std::optional<SafetensorsWriter> writer_;
  int64_t total_bytes_ = 0;  // of tensor data, for the index
};

}  // namespace lathe
