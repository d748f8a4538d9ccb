#include "engine/model/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/read_file.h"
#include "engine/core/strings.h"

namespace lathe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";

// Parses the header JSON object; fills `tensors` and `metadata`. Throws nothing.
Status parse_header(const char* text, size_t size, uint64_t data_size, const uint8_t* data_start,
                    std::vector<SafetensorsTensor>* tensors,
                    std::map<std::string, std::string>* metadata) {
  std::set<std::string> seen;
  std::string duplicate;
  json header;
  try {
    // The callback sees every top-level key, so duplicates (which json would silently merge) are
    // caught.
    header =
        json::parse(text, text + size, [&](int depth, json::parse_event_t event, json& parsed) {
          if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
            const std::string& k = parsed.get_ref<const std::string&>();
            if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
          }
          return true;
        });
  } catch (const json::exception& e) {
    return corrupt_file(std::string("the header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) return corrupt_file("the header lists tensor '" + duplicate + "' twice");
  if (!header.is_object()) return corrupt_file("the header is not a JSON object");

  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const json& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) return corrupt_file("__metadata__ is not a JSON object");
        for (auto m = v.begin(); m != v.end(); ++m)
          (*metadata)[m.key()] =
              m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
        continue;
      }
      const std::string what = "tensor '" + name + "'";
      if (!v.is_object()) return corrupt_file(what + ": entry is not a JSON object");
      SafetensorsTensor t;
      t.name = name;
      const auto dt = v.find("dtype");
      if (dt == v.end() || !dt->is_string()) return corrupt_file(what + " has no \"dtype\" string");
      t.dtype_name = dt->get<std::string>();
      const std::optional<int64_t> elem = safetensors_dtype_size(t.dtype_name);
      if (!elem)
        return unsupported(what + " has dtype '" + t.dtype_name + "', which Lathe does not know");
      t.dtype = dtype_from_safetensors(t.dtype_name);

      const auto sh = v.find("shape");
      if (sh == v.end() || !sh->is_array()) return corrupt_file(what + " has no \"shape\" array");
      int64_t numel = 1;
      bool overflow = false;
      for (const json& d : *sh) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          return corrupt_file(
              what + " has a shape entry that is not a non-negative integer: " + sh->dump());
        const int64_t n = d.get<int64_t>();
        if (n != 0 && numel > std::numeric_limits<int64_t>::max() / n)
          overflow = true;
        else
          numel *= n;
        t.shape.push_back(n);
      }
      if (overflow || numel > std::numeric_limits<int64_t>::max() / *elem)
        return corrupt_file(what + " has a shape " + sh->dump() + " whose size overflows 64 bits");

      const auto off = v.find("data_offsets");
      if (off == v.end() || !off->is_array() || off->size() != 2 ||
          !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
        return corrupt_file(what +
                            " has no \"data_offsets\": [begin, end] pair of non-negative integers");
      t.begin = (*off)[0].get<uint64_t>();
      t.end = (*off)[1].get<uint64_t>();
      if (t.begin > t.end)
        return corrupt_file(strformat("%s has data_offsets [%llu, %llu] with begin after end",
                                      what.c_str(), static_cast<unsigned long long>(t.begin),
                                      static_cast<unsigned long long>(t.end)));
      if (t.end > data_size)
        return corrupt_file(
            strformat("truncated: %s ends at data byte %llu but the data section has %llu bytes",
                      what.c_str(), static_cast<unsigned long long>(t.end),
                      static_cast<unsigned long long>(data_size)));
      const uint64_t expected = static_cast<uint64_t>(numel * *elem);
      if (t.end - t.begin != expected)
        return corrupt_file(strformat(
            "%s: data_offsets [%llu, %llu] hold %llu bytes, but shape %s of %s needs %llu",
            what.c_str(), static_cast<unsigned long long>(t.begin),
            static_cast<unsigned long long>(t.end),
            static_cast<unsigned long long>(t.end - t.begin), sh->dump().c_str(),
            t.dtype_name.c_str(), static_cast<unsigned long long>(expected)));
      t.data = data_start + t.begin;
      tensors->push_back(std::move(t));
    }
  } catch (const json::exception& e) {
    return corrupt_file(std::string("unexpected header content: ") + e.what());
  }

  // Ranges must not overlap (zero-sized tensors take no room).
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : *tensors)
    if (t.end > t.begin) by_offset.push_back(&t);
  std::sort(
      by_offset.begin(), by_offset.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      return corrupt_file("tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                          "' overlap in the data section");
  std::sort(tensors->begin(), tensors->end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  return Status();
}

}  // namespace

std::optional<int64_t> safetensors_dtype_size(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return std::nullopt;
}

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<TensorView> SafetensorsTensor::view(const std::string& file) const {
  if (!dtype)
    return unsupported(file + ": tensor '" + name + "' has dtype " + dtype_name +
                       ", which Lathe cannot compute with (use F32, F16 or BF16 weights)");
  if (shape.size() > static_cast<size_t>(TensorView::kMaxDims))
    return unsupported(strformat("%s: tensor '%s' has %zu dimensions; Lathe handles up to %d",
                                 file.c_str(), name.c_str(), shape.size(), TensorView::kMaxDims));
  TensorView v;
  v.dtype = *dtype;
  v.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) v.shape[i] = shape[i];
  v.data = data;
  return v;
}

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  LATHE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::parse(
    std::shared_ptr<MappedFile> file) {
  const std::string& path = file->path();
  const uint64_t size = file->size();
  if (size < 8)
    return corrupt_file(strformat("not a safetensors file: it has only %llu bytes",
                                  static_cast<unsigned long long>(size)))
        .with_context(path);
  uint64_t n = 0;
  std::memcpy(&n, file->data(), 8);
  if (n > kMaxHeaderBytes)
    return corrupt_file(
               strformat("the header claims %llu bytes; safetensors headers are at most 100 MB "
                         "(is this a safetensors file?)",
                         static_cast<unsigned long long>(n)))
        .with_context(path);
  if (n > size - 8)
    return corrupt_file(
               strformat(
                   "truncated: the header claims %llu bytes but only %llu follow the length field",
                   static_cast<unsigned long long>(n), static_cast<unsigned long long>(size - 8)))
        .with_context(path);
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->file_ = file;
  f->data_offset_ = 8 + n;
  LATHE_RETURN_IF_ERROR(parse_header(reinterpret_cast<const char*>(file->data() + 8),
                                     static_cast<size_t>(n), size - 8 - n, file->data() + 8 + n,
                                     &f->tensors_, &f->metadata_)
                            .with_context(path));
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return std::shared_ptr<const SafetensorsFile>(std::move(f));
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsCheckpoint::Entry* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

int64_t SafetensorsCheckpoint::total_file_bytes() const {
  int64_t n = 0;
  for (const auto& f : files_) n += static_cast<int64_t>(f->file_size());
  return n;
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open_folder(const std::string& folder) {
  const fs::path dir(folder);
  std::error_code ec;
  SafetensorsCheckpoint ckpt;
  std::vector<std::string> names;
  std::map<std::string, std::string> weight_map;  // tensor -> file (from the index)
  const fs::path index_path = dir / kIndexFile;

  if (fs::exists(index_path, ec)) {
    ckpt.sharded_ = true;
    LATHE_ASSIGN_OR_RETURN(std::string text, read_file(index_path.string()));
    try {
      const json index = json::parse(text);
      const auto wm = index.find("weight_map");
      if (!index.is_object() || wm == index.end() || !wm->is_object())
        return corrupt_file(index_path.string() + ": no \"weight_map\" object");
      std::set<std::string> files;
      for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it.value().is_string())
          return corrupt_file(index_path.string() + ": weight_map entry '" + it.key() +
                              "' is not a file name");
        const std::string file = it.value().get<std::string>();
        const fs::path rel(file);
        if (file.empty() || rel.is_absolute() ||
            std::find(rel.begin(), rel.end(), "..") != rel.end())
          return corrupt_file(index_path.string() + ": weight_map entry '" + it.key() +
                              "' points outside the folder ('" + file + "')");
        weight_map[it.key()] = file;
        files.insert(file);
      }
      names.assign(files.begin(), files.end());
    } catch (const json::exception& e) {
      return corrupt_file(index_path.string() + ": not valid JSON: " + e.what());
    }
    if (names.empty()) return corrupt_file(index_path.string() + ": the weight_map is empty");
  } else if (fs::exists(dir / "model.safetensors", ec)) {
    names.push_back("model.safetensors");
  } else {
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".safetensors" && !entry.is_directory())
        names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
  }
  if (names.empty())
    return not_found(
        folder + ": no model weights: expected model.safetensors, " + kIndexFile +
        " or other *.safetensors files (pytorch_model.bin checkpoints are not supported; "
        "convert them to safetensors)");

  for (const std::string& name : names) {
    const fs::path p = dir / name;
    if (!fs::exists(p, ec)) {
      if (ckpt.sharded_)
        return not_found(index_path.string() + " lists shard '" + name +
                         "', which is missing from the folder");
      return not_found(p.string() + ": no such file");
    }
    LATHE_ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file,
                           SafetensorsFile::open(p.string()));
    ckpt.files_.push_back(std::move(file));
  }
  for (const auto& file : ckpt.files_) {
    for (const SafetensorsTensor& t : file->tensors()) {
      auto [it, inserted] = ckpt.tensors_.emplace(t.name, Entry{&t, file.get()});
      if (!inserted)
        return corrupt_file(folder + ": tensor '" + t.name + "' is in both " +
                            it->second.file->path() + " and " + file->path());
    }
  }
  for (const auto& [tensor, file] : weight_map) {
    const Entry* e = ckpt.find(tensor);
    if (e == nullptr || e->file->path() != (dir / file).string())
      return corrupt_file(index_path.string() + " says tensor '" + tensor + "' is in " + file +
                          ", but that file does not contain it");
  }
  return ckpt;
}

}  // namespace lathe
