// A GGUF file (versions 2 and 3), parsed and bounds-checked, with the weights left memory-mapped.
//
// open() reads the header, every metadata key/value (all value types, nested arrays included) and
// every tensor info, and checks them against the file before anything is allocated from a count in
// the file: a length or count that cannot fit in the remaining bytes is an error, never an
// allocation. Every tensor must lie inside the data section, at an offset that is a multiple of
// general.alignment, with a type Lathe supports (dtype.h) and a row length that is a multiple of
// its block size. Errors are kCorruptFile (malformed), kUnsupported (well-formed but not handled:
// version 1, big-endian files, tensor types such as q2_K) or kIo / kNotFound from the OS; every
// message starts with the file's path.
//
// Thread-safety: immutable after open(); share it freely.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/mapped_file.h"
#include "engine/core/status.h"
#include "engine/core/tensor_view.h"

namespace lathe {

// GGUF metadata value types (the u32 stored before each value).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* gguf_type_name(GgufType t);  // "u32", "string", "array", ...

// One metadata value. Scalars use one field according to `type`; arrays keep their elements in the
// vector that matches `array_type` (integers and bools in array_ints, floats in array_floats,
// strings in array_strings, nested arrays in array_arrays).
struct GgufValue {
  GgufType type = GgufType::kU8;

  int64_t int_value = 0;     // integer types and bool (0/1); u64 values above INT64_MAX wrap
  double float_value = 0.0;  // f32 (widened exactly) and f64
  std::string string_value;

  GgufType array_type = GgufType::kU8;
  std::vector<int64_t> array_ints;
  std::vector<double> array_floats;
  std::vector<std::string> array_strings;
  std::vector<GgufValue> array_arrays;

  bool is_integer() const;  // u8 .. i64 (not bool)
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
  int64_t array_size() const;
  // Short human-readable form for inspection: "30", "1e-05", "\"llama\"", "[49152 x string]".
  std::string to_display_string() const;
};

// A tensor as stored: ggml dims (dims[0] contiguous), its type, and where its bytes are.
struct GgufTensorInfo {
  std::string name;
  int n_dims = 0;
  std::array<int64_t, TensorView::kMaxDims> ne{1, 1, 1, 1};  // ggml order, unused dims are 1
  uint32_t ggml_type = 0;
  DType dtype = DType::kF32;
  uint64_t offset = 0;            // relative to the data section
  int64_t nbytes = 0;             // bytes of the tensor's data
  const uint8_t* data = nullptr;  // into the mapped file

  int64_t numel() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  // The tensor in PyTorch shape order (ggml dims reversed): ne {576, 1536} -> shape [1536, 576].
  TensorView view() const;
};

class GgufFile {
 public:
  // Limits on what a file may declare (far above any real model, far below what would hurt).
  static constexpr int kMaxArrayNesting = 8;
  static constexpr uint64_t kDefaultAlignment = 32;
  static constexpr uint64_t kMaxAlignment = 1u << 20;

  static Result<std::shared_ptr<const GgufFile>> open(const std::string& path);
  // Parses an already mapped file (open() uses it).
  static Result<std::shared_ptr<const GgufFile>> parse(std::shared_ptr<MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  size_t file_size() const { return file_->size(); }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute start of the data section
  const std::shared_ptr<MappedFile>& mapped_file() const { return file_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed access. Absent key: nullopt. Present with an incompatible type: kCorruptFile naming the
  // file, the key, the type found and the type expected.
  Result<std::optional<int64_t>> get_int(std::string_view key) const;   // any integer type
  Result<std::optional<double>> get_float(std::string_view key) const;  // f32/f64 or integer
  Result<std::optional<bool>> get_bool(std::string_view key) const;     // bool or integer
  Result<std::optional<std::string>> get_string(std::string_view key) const;
  // Arrays; an absent key gives an empty vector.
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<double>> get_float_array(std::string_view key) const;  // floats or integers

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status type_error(std::string_view key, const GgufValue& v, const char* expected) const;

  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace lathe
