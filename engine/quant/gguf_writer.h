// Writing GGUF version 3 files (the layout engine/model/gguf_file.h reads, FORMATS.md): header,
// metadata key/values (every GGUF value type, arrays included), tensor infos, then the data section
// starting at a multiple of general.alignment with every tensor at an aligned offset (zero
// padding). Metadata and tensors are declared up front; tensor bytes are then streamed in declared
// order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/gguf_file.h"
#include "engine/quant/atomic_output.h"

namespace lathe {

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// Builders for metadata values.
GgufValue gguf_string(std::string s);
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_u64(uint64_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_string_array(std::vector<std::string> v);
GgufValue gguf_i32_array(std::vector<int64_t> v);
GgufValue gguf_f32_array(std::vector<double> v);

// Sets `key` in `m`: replaces its value in place, or appends it. gguf_erase removes it.
void gguf_set(GgufMetadata& m, const std::string& key, GgufValue value);
void gguf_erase(GgufMetadata& m, const std::string& key);
const GgufValue* gguf_find(const GgufMetadata& m, const std::string& key);

struct GgufTensorSpec {
  std::string name;
  DType dtype = DType::kF32;   // must have a ggml id (ggml_type_id)
  std::vector<int64_t> shape;  // PyTorch order; written reversed (ne[0] = the last dimension)

  int64_t nbytes() const;  // -1 when the last dimension does not fit the type's blocks
};

// Bytes of the whole file for this metadata and these tensors (alignment from general.alignment,
// default 32).
int64_t gguf_file_size(const GgufMetadata& metadata, const std::vector<GgufTensorSpec>& tensors);

class GgufWriter {
 public:
  // Creates `path` and writes header, metadata and tensor infos. kInvalidArgument for a type
  // without a ggml id, a row that does not fit the blocks, a duplicate name, or a bad alignment.
  static Result<GgufWriter> create(const std::string& path, const GgufMetadata& metadata,
                                   std::vector<GgufTensorSpec> tensors);

  // The next declared tensor's bytes (exact size, declared order); padding follows.
  Status write(const std::string& name, const void* data, size_t n);
  // The next declared tensor's bytes in consecutive pieces (streamed tensors): the pieces of one
  // tensor add up to its exact size; padding follows the last. kInternal for a piece past the
  // tensor's end or of another tensor before this one is complete.
  Status write_part(const std::string& name, const void* data, size_t n);
  // Checks that every declared tensor was written, then closes the file (fsynced unless `sync` is
  // false: FileWriter::close).
  Status finish(bool sync = true);

 private:
  GgufWriter() = default;
  std::unique_ptr<FileWriter> file_;
  std::vector<GgufTensorSpec> tensors_;
  uint64_t alignment_ = 32;
  size_t next_ = 0;
  int64_t written_ = 0;  // bytes of tensors_[next_] written so far
};

}  // namespace lathe
