#include "engine/quant/gguf_writer.h"

#include <cstring>
#include <set>

#include "engine/core/strings.h"

namespace lathe {
namespace {

class Bytes {
 public:
  template <typename T>
  void put(T v) {
    const size_t old = b_.size();
    b_.resize(old + sizeof(T));
    std::memcpy(b_.data() + old, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }
  const std::vector<uint8_t>& data() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

void put_scalar(Bytes& b, GgufType t, int64_t i, double f) {
  switch (t) {
    case GgufType::kU8:
      return b.put<uint8_t>(static_cast<uint8_t>(i));
    case GgufType::kI8:
      return b.put<int8_t>(static_cast<int8_t>(i));
    case GgufType::kU16:
      return b.put<uint16_t>(static_cast<uint16_t>(i));
    case GgufType::kI16:
      return b.put<int16_t>(static_cast<int16_t>(i));
    case GgufType::kU32:
      return b.put<uint32_t>(static_cast<uint32_t>(i));
    case GgufType::kI32:
      return b.put<int32_t>(static_cast<int32_t>(i));
    case GgufType::kU64:
      return b.put<uint64_t>(static_cast<uint64_t>(i));
    case GgufType::kI64:
      return b.put<int64_t>(i);
    case GgufType::kBool:
      return b.put<uint8_t>(i != 0 ? 1 : 0);
    case GgufType::kF32:
      return b.put<float>(static_cast<float>(f));
    case GgufType::kF64:
      return b.put<double>(f);
    default:
      return;
  }
}

void put_value(Bytes& b, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kString:
      return b.put_string(v.string_value);
    case GgufType::kArray:
      b.put<uint32_t>(static_cast<uint32_t>(v.array_type));
      b.put<uint64_t>(static_cast<uint64_t>(v.array_size()));
      switch (v.array_type) {
        case GgufType::kString:
          for (const std::string& s : v.array_strings) b.put_string(s);
          return;
        case GgufType::kF32:
        case GgufType::kF64:
          for (double f : v.array_floats) put_scalar(b, v.array_type, 0, f);
          return;
        case GgufType::kArray:
          for (const GgufValue& e : v.array_arrays) put_value(b, e);
          return;
        default:
          for (int64_t i : v.array_ints) put_scalar(b, v.array_type, i, 0.0);
          return;
      }
    default:
      return put_scalar(b, v.type, v.int_value, v.float_value);
  }
}

uint64_t alignment_of(const GgufMetadata& m) {
  const GgufValue* a = gguf_find(m, "general.alignment");
  return a != nullptr && a->is_integer() ? static_cast<uint64_t>(a->int_value)
                                         : GgufFile::kDefaultAlignment;
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// Header, metadata and tensor infos; tensor offsets aligned within the data section.
Result<std::vector<uint8_t>> encode_head(const GgufMetadata& metadata,
                                         const std::vector<GgufTensorSpec>& tensors) {
  const uint64_t al = alignment_of(metadata);
  if (al == 0 || (al & (al - 1)) != 0 || al > GgufFile::kMaxAlignment)
    return invalid_argument(strformat("general.alignment %llu is not a power of two up to %llu",
                                      static_cast<unsigned long long>(al),
                                      static_cast<unsigned long long>(GgufFile::kMaxAlignment)));
  Bytes b;
  b.put<uint32_t>(0x46554747u);  // "GGUF"
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors.size());
  b.put<uint64_t>(metadata.size());
  std::set<std::string> keys;
  for (const auto& [key, value] : metadata) {
    if (!keys.insert(key).second) return invalid_argument("GGUF metadata key '" + key + "' twice");
    b.put_string(key);
    b.put<uint32_t>(static_cast<uint32_t>(value.type));
    put_value(b, value);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const GgufTensorSpec& t : tensors) {
    if (!names.insert(t.name).second)
      return invalid_argument("GGUF tensor '" + t.name + "' declared twice");
    const std::optional<uint32_t> id = ggml_type_id(t.dtype);
    if (!id)
      return invalid_argument("GGUF tensor '" + t.name + "': type " +
                              std::string(dtype_name(t.dtype)) + " has no ggml id");
    if (t.shape.empty() || t.shape.size() > 4 || t.nbytes() < 0)
      return invalid_argument(strformat("GGUF tensor '%s': shape of %zu dims does not fit type %s",
                                        t.name.c_str(), t.shape.size(),
                                        std::string(dtype_name(t.dtype)).c_str()));
    b.put_string(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) b.put<uint64_t>(*it);
    b.put<uint32_t>(*id);
    b.put<uint64_t>(offset);
    offset = align_up(offset + static_cast<uint64_t>(t.nbytes()), al);
  }
  return b.data();
}

}  // namespace

namespace {

GgufValue scalar(GgufType t, int64_t i, double f = 0.0) {
  GgufValue v;
  v.type = t;
  v.int_value = i;
  v.float_value = f;
  return v;
}

GgufValue array_of(GgufType element) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = element;
  return v;
}

}  // namespace

GgufValue gguf_string(std::string s) {
  GgufValue v = scalar(GgufType::kString, 0);
  v.string_value = std::move(s);
  return v;
}
GgufValue gguf_u32(uint32_t x) {
  return scalar(GgufType::kU32, x);
}
GgufValue gguf_i32(int32_t x) {
  return scalar(GgufType::kI32, x);
}
GgufValue gguf_u64(uint64_t x) {
  return scalar(GgufType::kU64, static_cast<int64_t>(x));
}
GgufValue gguf_f32(float x) {
  return scalar(GgufType::kF32, 0, x);
}
GgufValue gguf_bool(bool x) {
  return scalar(GgufType::kBool, x ? 1 : 0);
}
GgufValue gguf_string_array(std::vector<std::string> a) {
  GgufValue v = array_of(GgufType::kString);
  v.array_strings = std::move(a);
  return v;
}
GgufValue gguf_i32_array(std::vector<int64_t> a) {
  GgufValue v = array_of(GgufType::kI32);
  v.array_ints = std::move(a);
  return v;
}
GgufValue gguf_f32_array(std::vector<double> a) {
  GgufValue v = array_of(GgufType::kF32);
  v.array_floats = std::move(a);
  return v;
}

void gguf_set(GgufMetadata& m, const std::string& key, GgufValue value) {
  for (auto& [k, v] : m)
    if (k == key) {
      v = std::move(value);
      return;
    }
  m.emplace_back(key, std::move(value));
}

void gguf_erase(GgufMetadata& m, const std::string& key) {
  for (auto it = m.begin(); it != m.end(); ++it)
    if (it->first == key) {
      m.erase(it);
      return;
    }
}

const GgufValue* gguf_find(const GgufMetadata& m, const std::string& key) {
  for (const auto& [k, v] : m)
    if (k == key) return &v;
  return nullptr;
}

int64_t GgufTensorSpec::nbytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (shape.empty() || shape.back() % dtype_info(dtype).block_size != 0) return -1;
  return dtype_bytes(dtype, n).value_or(-1);
}

int64_t gguf_file_size(const GgufMetadata& metadata, const std::vector<GgufTensorSpec>& tensors) {
  Result<std::vector<uint8_t>> head = encode_head(metadata, tensors);
  if (!head.is_ok()) return -1;
  const uint64_t al = alignment_of(metadata);
  uint64_t total = align_up(head->size(), al);
  for (size_t i = 0; i < tensors.size(); ++i) {
    total += static_cast<uint64_t>(tensors[i].nbytes());
    if (i + 1 < tensors.size()) total = align_up(total, al);
  }
  return static_cast<int64_t>(total);
}

Result<GgufWriter> GgufWriter::create(const std::string& path, const GgufMetadata& metadata,
                                      std::vector<GgufTensorSpec> tensors) {
  Result<std::vector<uint8_t>> head = encode_head(metadata, tensors);
  if (!head.is_ok()) return head.status().with_context(path);
  GgufWriter w;
  w.alignment_ = alignment_of(metadata);
  LATHE_ASSIGN_OR_RETURN(FileWriter f, FileWriter::create(path));
  w.file_ = std::make_unique<FileWriter>(std::move(f));
  LATHE_RETURN_IF_ERROR(w.file_->write(head->data(), head->size()));
  LATHE_RETURN_IF_ERROR(w.file_->write_zeros(align_up(head->size(), w.alignment_) - head->size()));
  w.tensors_ = std::move(tensors);
  return w;
}

Status GgufWriter::write(const std::string& name, const void* data, size_t n) {
  if (next_ < tensors_.size() && tensors_[next_].name == name && written_ != 0)
    return internal_error(file_->path() + ": tensor '" + name +
                          "' is partly written: its other parts go through write_part");
  if (next_ < tensors_.size() && tensors_[next_].name == name &&
      static_cast<int64_t>(n) != tensors_[next_].nbytes())
    return internal_error(strformat("%s: tensor '%s' has %zu bytes, declared %lld",
                                    file_->path().c_str(), name.c_str(), n,
                                    static_cast<long long>(tensors_[next_].nbytes())));
  return write_part(name, data, n);
}

Status GgufWriter::write_part(const std::string& name, const void* data, size_t n) {
  if (next_ >= tensors_.size() || tensors_[next_].name != name)
    return internal_error(file_->path() + ": tensor '" + name + "' written out of order");
  const int64_t total = tensors_[next_].nbytes();
  if (written_ + static_cast<int64_t>(n) > total)
    return internal_error(strformat(
        "%s: tensor '%s' gets %lld bytes, declared %lld", file_->path().c_str(), name.c_str(),
        static_cast<long long>(written_ + static_cast<int64_t>(n)), static_cast<long long>(total)));
  LATHE_RETURN_IF_ERROR(file_->write(data, n));
  written_ += static_cast<int64_t>(n);
  if (written_ < total) return Status();
  written_ = 0;
  ++next_;
  if (next_ < tensors_.size())
    LATHE_RETURN_IF_ERROR(
        file_->write_zeros(align_up(file_->position(), alignment_) - file_->position()));
  return Status();
}

Status GgufWriter::finish(bool sync) {
  if (next_ != tensors_.size())
    return internal_error(strformat("%s: %zu of %zu tensors were written", file_->path().c_str(),
                                    next_, tensors_.size()));
  return file_->close(sync);
}

}  // namespace lathe
