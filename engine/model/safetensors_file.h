// safetensors files, single and sharded, parsed and bounds-checked, with the data memory-mapped.
//
// File layout: u64 little-endian N, N bytes of JSON header, then the data section. The header maps
// tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the data
// section) plus an optional "__metadata__" object of strings. open() checks: N <= 100 MB and
// 8 + N <= file size; valid JSON; no duplicate names; known dtypes; non-negative shapes without
// overflow; begin <= end <= data size; end - begin == numel * dtype size (a header whose sizes lie
// is an error naming the tensor); no two tensors' ranges overlap. Errors start with the file path.
//
// Thread-safety: immutable after open(); share it freely.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/mapped_file.h"
#include "engine/core/status.h"
#include "engine/core/tensor_view.h"

namespace lathe {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;      // as written: "BF16", "F32", "F64", "BOOL", ...
  std::optional<DType> dtype;  // nullopt for dtypes Lathe cannot compute with (F64, BOOL, I16, U16,
                               // U32, U64, F8_E5M2)
  std::vector<int64_t> shape;  // PyTorch order
  uint64_t begin = 0;          // data_offsets, relative to the data section
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // into the mapped file (not necessarily aligned)

  int64_t numel() const;
  int64_t nbytes() const { return static_cast<int64_t>(end - begin); }
  // A TensorView of the data; kUnsupported when dtype is nullopt or the tensor has more than
  // TensorView::kMaxDims dimensions. `file` names the file in the error.
  Result<TensorView> view(const std::string& file) const;
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  static Result<std::shared_ptr<const SafetensorsFile>> open(const std::string& path);
  static Result<std::shared_ptr<const SafetensorsFile>> parse(std::shared_ptr<MappedFile> file);

  const std::string& path() const { return file_->path(); }
  size_t file_size() const { return file_->size(); }
  uint64_t data_offset() const { return data_offset_; }  // 8 + header length
  const std::shared_ptr<MappedFile>& mapped_file() const { return file_; }

  // Tensors sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // "__metadata__" (non-string values are kept as their JSON text).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::shared_ptr<MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All safetensors files of a Hugging Face model folder, with one name -> tensor index.
class SafetensorsCheckpoint {
 public:
  struct Entry {
    const SafetensorsTensor* tensor = nullptr;
    const SafetensorsFile* file = nullptr;
  };

  // With model.safetensors.index.json: the files of its weight_map (names must stay inside the
  // folder; each must exist; every tensor the map lists must be in the file it names). Otherwise
  // model.safetensors when present, else every *.safetensors in the folder (sorted). A tensor that
  // appears in two files is an error. kNotFound (naming the folder) when there are no weights.
  static Result<SafetensorsCheckpoint> open_folder(const std::string& folder);

  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  const std::map<std::string, Entry>& tensors() const { return tensors_; }
  const Entry* find(const std::string& name) const;
  int64_t total_file_bytes() const;
  bool sharded() const { return sharded_; }  // read through an index

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, Entry> tensors_;
  bool sharded_ = false;
};

// Element size in bytes of a safetensors dtype string; nullopt for unknown strings.
std::optional<int64_t> safetensors_dtype_size(const std::string& dtype);

}  // namespace lathe
