#include "engine/model/gguf_file.h"

#include <cstring>
#include <limits>

#include "engine/core/strings.h"

namespace lathe {
namespace {

constexpr uint32_t kMaxGgmlDims = 4;

// Smallest encoding of one value of each type, used to reject counts the file cannot hold.
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
    case GgufType::kString:
      return 8;  // the u64 length
    case GgufType::kArray:
      return 12;  // u32 element type + u64 count
  }
  return 1;
}

bool valid_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::kF64);
}

std::string supported_ggml_types() {
  std::string s;
  for (uint32_t id = 0; id < 64; ++id) {
    if (!dtype_from_ggml(id)) continue;
    if (!s.empty()) s += ", ";
    s += ggml_type_name(id);
  }
  return s;
}

// A bounds-checked little-endian cursor over the mapped bytes. Reads fail (return false) instead of
// running past the end; the caller turns that into an error that names what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  bool read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool read_string(std::string* out) {
    uint64_t len = 0;
    if (!read(&len) || len > remaining()) return false;
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

class Parser {
 public:
  Parser(const MappedFile& file) : cur_(file.data(), file.size()), file_size_(file.size()) {}

  Cursor& cursor() { return cur_; }

  Status truncated(const std::string& what) const {
    return corrupt_file(strformat(
        "truncated: %s runs past the end of the file at byte %llu (the file has %llu bytes)",
        what.c_str(), static_cast<unsigned long long>(cur_.pos()),
        static_cast<unsigned long long>(file_size_)));
  }

  // Reads one value of `type` into `out`. `what` names the key for errors.
  Status read_value(GgufType type, GgufValue* out, int depth, const std::string& what) {
    out->type = type;
    switch (type) {
      case GgufType::kU8:
        return read_int<uint8_t>(out, what);
      case GgufType::kI8:
        return read_int<int8_t>(out, what);
      case GgufType::kU16:
        return read_int<uint16_t>(out, what);
      case GgufType::kI16:
        return read_int<int16_t>(out, what);
      case GgufType::kU32:
        return read_int<uint32_t>(out, what);
      case GgufType::kI32:
        return read_int<int32_t>(out, what);
      case GgufType::kU64:
        return read_int<uint64_t>(out, what);
      case GgufType::kI64:
        return read_int<int64_t>(out, what);
      case GgufType::kBool: {
        uint8_t b = 0;
        if (!cur_.read(&b)) return truncated(what);
        if (b > 1)
          return corrupt_file(strformat("%s: bool value %u is neither 0 nor 1", what.c_str(), b));
        out->int_value = b;
        return Status();
      }
      case GgufType::kF32: {
        float f = 0;
        if (!cur_.read(&f)) return truncated(what);
        out->float_value = f;
        return Status();
      }
      case GgufType::kF64: {
        double f = 0;
        if (!cur_.read(&f)) return truncated(what);
        out->float_value = f;
        return Status();
      }
      case GgufType::kString:
        if (!cur_.read_string(&out->string_value)) return truncated(what + " (string)");
        return Status();
      case GgufType::kArray:
        return read_array(out, depth, what);
    }
    return corrupt_file(what + ": unknown value type");
  }

 private:
  template <typename T>
  Status read_int(GgufValue* out, const std::string& what) {
    T v{};
    if (!cur_.read(&v)) return truncated(what);
    out->int_value = static_cast<int64_t>(v);
    return Status();
  }

  Status read_array(GgufValue* out, int depth, const std::string& what) {
    if (depth >= GgufFile::kMaxArrayNesting)
      return corrupt_file(strformat("%s: arrays nested more than %d deep", what.c_str(),
                                    GgufFile::kMaxArrayNesting));
    uint32_t elem = 0;
    uint64_t count = 0;
    if (!cur_.read(&elem) || !cur_.read(&count)) return truncated(what + " (array header)");
    if (!valid_type(elem))
      return corrupt_file(
          strformat("%s: array element type %u is not a GGUF type (0..12)", what.c_str(), elem));
    const GgufType et = static_cast<GgufType>(elem);
    out->array_type = et;
    // Never allocate from an untrusted count: each element takes at least min_value_bytes.
    if (count > cur_.remaining() / min_value_bytes(et))
      return corrupt_file(
          strformat("truncated or corrupt: %s is an array of %llu %s elements, which cannot fit in "
                    "the %llu bytes left in the file",
                    what.c_str(), static_cast<unsigned long long>(count), gguf_type_name(et),
                    static_cast<unsigned long long>(cur_.remaining())));
    const size_t n = static_cast<size_t>(count);
    GgufValue item;
    switch (et) {
      case GgufType::kString:
        out->array_strings.resize(n);
        for (size_t i = 0; i < n; ++i)
          if (!cur_.read_string(&out->array_strings[i]))
            return truncated(strformat("element %zu of %s (a string)", i, what.c_str()));
        return Status();
      case GgufType::kF32:
      case GgufType::kF64:
        out->array_floats.resize(n);
        for (size_t i = 0; i < n; ++i) {
          LATHE_RETURN_IF_ERROR(read_value(et, &item, depth + 1, what));
          out->array_floats[i] = item.float_value;
        }
        return Status();
      case GgufType::kArray:
        out->array_arrays.resize(n);
        for (size_t i = 0; i < n; ++i)
          LATHE_RETURN_IF_ERROR(read_value(et, &out->array_arrays[i], depth + 1,
                                           strformat("element %zu of %s", i, what.c_str())));
        return Status();
      default:
        out->array_ints.resize(n);
        for (size_t i = 0; i < n; ++i) {
          LATHE_RETURN_IF_ERROR(read_value(et, &item, depth + 1, what));
          out->array_ints[i] = item.int_value;
        }
        return Status();
    }
  }

  Cursor cur_;
  uint64_t file_size_;
};

std::string printable_magic(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (p[i] >= 0x20 && p[i] < 0x7f) ? static_cast<char>(p[i]) : '.';
  return s;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

int64_t GgufValue::array_size() const {
  if (type != GgufType::kArray) return 0;
  switch (array_type) {
    case GgufType::kString:
      return static_cast<int64_t>(array_strings.size());
    case GgufType::kF32:
    case GgufType::kF64:
      return static_cast<int64_t>(array_floats.size());
    case GgufType::kArray:
      return static_cast<int64_t>(array_arrays.size());
    default:
      return static_cast<int64_t>(array_ints.size());
  }
}

std::string GgufValue::to_display_string() const {
  if (type == GgufType::kString) return "\"" + string_value + "\"";
  if (type == GgufType::kArray)
    return strformat("[%lld x %s]", static_cast<long long>(array_size()),
                     gguf_type_name(array_type));
  if (type == GgufType::kBool) return int_value ? "true" : "false";
  if (is_float()) return strformat("%g", float_value);
  if (type == GgufType::kU64) return std::to_string(static_cast<uint64_t>(int_value));
  return std::to_string(int_value);
}

TensorView GgufTensorInfo::view() const {
  TensorView v;
  v.dtype = dtype;
  v.ndim = n_dims;
  for (int i = 0; i < n_dims; ++i) v.shape[i] = ne[n_dims - 1 - i];
  v.data = data;
  return v;
}

Result<std::shared_ptr<const GgufFile>> GgufFile::open(const std::string& path) {
  LATHE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<std::shared_ptr<const GgufFile>> GgufFile::parse(std::shared_ptr<MappedFile> file) {
  const std::string& path = file->path();
  auto fail = [&](const Status& s) { return s.with_context(path); };
  std::shared_ptr<GgufFile> g(new GgufFile());
  g->file_ = file;
  Parser parser(*file);
  Cursor& cur = parser.cursor();

  // Header.
  if (file->size() < 4)
    return fail(corrupt_file(strformat("not a GGUF file: it has only %zu bytes", file->size())));
  if (std::memcmp(file->data(), "GGUF", 4) != 0)
    return fail(corrupt_file("not a GGUF file: it starts with '" +
                             printable_magic(file->data(), 4) + "' instead of 'GGUF'"));
  uint32_t magic = 0, version = 0;
  uint64_t tensor_count = 0, kv_count = 0;
  (void)cur.read(&magic);
  if (!cur.read(&version)) return fail(parser.truncated("the header (version)"));
  if (version == 1)
    return fail(
        unsupported("GGUF version 1 (2023) is not supported; convert the model again with a "
                    "current llama.cpp"));
  if ((version & 0xffffu) == 0 && (version >> 16) != 0)
    return fail(unsupported("this is a big-endian GGUF file; Lathe reads little-endian GGUF only"));
  if (version != 2 && version != 3)
    return fail(unsupported(
        strformat("GGUF version %u is not supported (Lathe reads versions 2 and 3)", version)));
  g->version_ = version;
  if (!cur.read(&tensor_count) || !cur.read(&kv_count))
    return fail(parser.truncated("the header (counts)"));
  // Each metadata entry takes at least 13 bytes (key length, type, a one-byte value); each tensor
  // info at least 24 (name length, n_dims, type, offset).
  if (kv_count > cur.remaining() / 13)
    return fail(corrupt_file(strformat(
        "the header declares %llu metadata entries, more than the file's %zu bytes can hold",
        static_cast<unsigned long long>(kv_count), file->size())));
  if (tensor_count > cur.remaining() / 24)
    return fail(corrupt_file(
        strformat("the header declares %llu tensors, more than the file's %zu bytes can hold",
                  static_cast<unsigned long long>(tensor_count), file->size())));

  // Metadata.
  g->metadata_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    if (!cur.read_string(&key))
      return fail(parser.truncated(
          strformat("the key of metadata entry %llu", static_cast<unsigned long long>(i))));
    const std::string what = "metadata '" + key + "'";
    uint32_t type = 0;
    if (!cur.read(&type)) return fail(parser.truncated(what + " (type)"));
    if (!valid_type(type))
      return fail(corrupt_file(
          strformat("%s has value type %u, which is not a GGUF type (0..12)", what.c_str(), type)));
    GgufValue value;
    LATHE_RETURN_IF_ERROR(fail(parser.read_value(static_cast<GgufType>(type), &value, 0, what)));
    if (g->metadata_index_.count(key))
      return fail(corrupt_file("metadata key '" + key + "' appears twice"));
    g->metadata_index_.emplace(key, g->metadata_.size());
    g->metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = g->find("general.alignment")) {
    if (!a->is_integer())
      return fail(corrupt_file(std::string("general.alignment has type ") +
                               gguf_type_name(a->type) + ", expected an integer"));
    const uint64_t al = static_cast<uint64_t>(a->int_value);
    if (al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment)
      return fail(corrupt_file(strformat(
          "general.alignment is %lld; it must be a power of two up to %llu",
          static_cast<long long>(a->int_value), static_cast<unsigned long long>(kMaxAlignment))));
    g->alignment_ = al;
  }

  // Tensor infos.
  g->tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    if (!cur.read_string(&t.name))
      return fail(parser.truncated(
          strformat("the name of tensor %llu", static_cast<unsigned long long>(i))));
    const std::string what = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    if (!cur.read(&n_dims)) return fail(parser.truncated(what + " (dims)"));
    if (n_dims == 0 || n_dims > kMaxGgmlDims)
      return fail(corrupt_file(strformat("%s has %u dimensions; GGUF tensors have 1 to %u",
                                         what.c_str(), n_dims, kMaxGgmlDims)));
    t.n_dims = static_cast<int>(n_dims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      if (!cur.read(&ne)) return fail(parser.truncated(what + " (dims)"));
      if (ne == 0)
        return fail(corrupt_file(strformat("%s has a dimension of size 0", what.c_str())));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && static_cast<uint64_t>(numel) >
                          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne))
        return fail(corrupt_file(what + " has dimensions whose product overflows 64 bits"));
      t.ne[d] = static_cast<int64_t>(ne);
      numel *= static_cast<int64_t>(ne);
    }
    if (!cur.read(&t.ggml_type) || !cur.read(&t.offset))
      return fail(parser.truncated(what + " (type and offset)"));
    const std::optional<DType> dt = dtype_from_ggml(t.ggml_type);
    if (!dt)
      return fail(unsupported(strformat(
          "%s has type %s, which Lathe does not support; supported: %s", t.name.c_str(),
          std::string(ggml_type_name(t.ggml_type)).c_str(), supported_ggml_types().c_str())));
    t.dtype = *dt;
    const DTypeInfo& info = dtype_info(t.dtype);
    if (t.ne[0] % info.block_size != 0)
      return fail(corrupt_file(strformat(
          "%s has type %s but its row length %lld is not a multiple of the block size %lld",
          what.c_str(), std::string(info.name).c_str(), static_cast<long long>(t.ne[0]),
          static_cast<long long>(info.block_size))));
    // numel / block_size * block_bytes cannot overflow: block_bytes <= 2 * block_size * 4.
    if (numel / info.block_size > std::numeric_limits<int64_t>::max() / info.block_bytes)
      return fail(corrupt_file(what + " is too large to address"));
    t.nbytes = numel / info.block_size * info.block_bytes;
    if (g->tensor_index_.count(t.name))
      return fail(corrupt_file("tensor '" + t.name + "' appears twice"));
    g->tensor_index_.emplace(t.name, g->tensors_.size());
    g->tensors_.push_back(std::move(t));
  }

  // Data section: starts at the next multiple of the alignment.
  const uint64_t end_of_infos = cur.pos();
  g->data_offset_ = (end_of_infos + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  const uint64_t size = file->size();
  const uint64_t data_size = g->data_offset_ <= size ? size - g->data_offset_ : 0;
  for (GgufTensorInfo& t : g->tensors_) {
    if (t.offset % g->alignment_ != 0)
      return fail(corrupt_file(
          strformat("tensor '%s' starts at data offset %llu, which is not a multiple of the "
                    "alignment %llu",
                    t.name.c_str(), static_cast<unsigned long long>(t.offset),
                    static_cast<unsigned long long>(g->alignment_))));
    if (g->data_offset_ > size || t.offset > data_size ||
        static_cast<uint64_t>(t.nbytes) > data_size - t.offset) {
      const unsigned long long end =
          static_cast<unsigned long long>(g->data_offset_) + t.offset + t.nbytes;
      return fail(corrupt_file(
          strformat("truncated: tensor '%s' ends at byte %llu but the file has %llu bytes",
                    t.name.c_str(), end, static_cast<unsigned long long>(size))));
    }
    t.data = file->data() + g->data_offset_ + t.offset;
  }
  return std::shared_ptr<const GgufFile>(std::move(g));
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::type_error(std::string_view key, const GgufValue& v, const char* expected) const {
  std::string found = gguf_type_name(v.type);
  if (v.type == GgufType::kArray) found += std::string(" of ") + gguf_type_name(v.array_type);
  return corrupt_file(path() + ": metadata '" + std::string(key) + "' has type " + found +
                      ", expected " + expected);
}

Result<std::optional<int64_t>> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_integer()) return type_error(key, *v, "an integer");
  if (v->type == GgufType::kU64 && v->int_value < 0)
    return corrupt_file(path() + ": metadata '" + std::string(key) + "' is larger than 2^63");
  return std::optional<int64_t>(v->int_value);
}

Result<std::optional<double>> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<double>();
  if (v->is_float()) return std::optional<double>(v->float_value);
  if (v->is_integer()) return std::optional<double>(static_cast<double>(v->int_value));
  return type_error(key, *v, "a number");
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<bool>();
  if (v->type == GgufType::kBool || v->is_integer()) return std::optional<bool>(v->int_value != 0);
  return type_error(key, *v, "a bool");
}

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->type != GgufType::kString) return type_error(key, *v, "a string");
  return std::optional<std::string>(v->string_value);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<std::string>();
  if (v->type != GgufType::kArray || v->array_type != GgufType::kString)
    return type_error(key, *v, "an array of strings");
  return v->array_strings;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<int64_t>();
  if (v->type != GgufType::kArray || v->array_type == GgufType::kString ||
      v->array_type == GgufType::kArray || v->array_type == GgufType::kF32 ||
      v->array_type == GgufType::kF64)
    return type_error(key, *v, "an array of integers");
  return v->array_ints;
}

Result<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<double>();
  if (v->type != GgufType::kArray || v->array_type == GgufType::kString ||
      v->array_type == GgufType::kArray)
    return type_error(key, *v, "an array of numbers");
  if (v->array_type == GgufType::kF32 || v->array_type == GgufType::kF64) return v->array_floats;
  std::vector<double> out(v->array_ints.begin(), v->array_ints.end());
  return out;
}

}  // namespace lathe
